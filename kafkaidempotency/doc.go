// Package kafkaidempotency runs a Kafka consumer group's handler once per
// record, whatever the redeliveries, with [idempotency.Do], on franz-go's
// kgo client: each record's key is claimed in the idempotency store that
// every member shares, the handler runs under the claim, and the record's
// offset is committed only after its outcome, and the outcome of every
// record before it in its partition, is stored, or the store failed to take
// it until the server's store timeout (docs/semantics/consumers.md, decision 270).
//
// It is a module of its own so that the core module requires no Kafka
// client. Its name pairs the ecosystem it adapts to with this library's,
// as otelidempotency does. The guide is docs/consumers.md in the
// repository; the rules every consumer package follows are in
// docs/semantics/consumers.md (decisions 81 to 84, 127, 150 to 153, 158).
//
// # Processing
//
// [Processor.Run] joins the consumer group with a kgo client built from
// the options it is given and processes each assigned partition's records
// in offset order, one goroutine per partition. Each record is run through
// [idempotency.Do] and settled by [idempotency.Server.Settle]:
//
//   - done, now or by an earlier delivery: its offset is marked, and
//     committed (kgo's AutoCommitMarks, every AutoCommitInterval, and at
//     once when a partition is revoked or Run ends);
//   - the handler failed with an error the server does not store, or
//     panicked ([ErrHandlerPanicked]): the record is run again in place,
//     after a backoff ([WithBackoff]), since a later commit would
//     acknowledge it; after [WithMaxAttempts] failed runs it is dead-lettered;
//   - the key is in flight on another member ([idempotency.ErrKeyInUse],
//     after a rebalance or a member's death), or the store is unavailable
//     or full: the record is tried again in place after the retry delay
//     ([WithRetryDelay]), for as long as it takes: these never count as
//     failed runs;
//   - the handler failed with an error the server stores, on this delivery
//     or an earlier one, or the record cannot be processed at all (no key,
//     a key reused for another value): final. The record is handed to the
//     dead-letter function ([WithDeadLetter]), then its offset is marked.
//
// # Rebalances
//
// When partitions are revoked, the Processor stops their goroutines after
// the record in hand, waits for that record's outcome to be stored,
// commits, and only then lets the rebalance go on: the partitions' next
// owner starts after the last record whose outcome is stored, and runs
// nothing twice. Partitions that are lost (the member was removed from
// the group) cannot be committed: their next owner gets the records after
// the last commit, finds the outcomes of those that ran, and meets the
// record still running here in flight ([idempotency.ErrKeyInUse]), which
// it tries again until the outcome is stored, or the claim's lease runs
// out if this member is dead.
//
// # Keys
//
// A record is keyed by its identity, never by its delivery: [OffsetKey],
// the default, keys it by topic, partition and offset, which every
// redelivery keeps; [HeaderKey] by a business id in a header, which also
// survives a producer's retried send. The record's value is the request
// the key stands for: a key reused for another value is refused with
// [idempotency.ErrKeyReused] and dead-lettered, not skipped.
package kafkaidempotency
