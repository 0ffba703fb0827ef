// Package watermillidempotency is a watermill router middleware that runs
// each message's handler once per key, whatever the redeliveries, with
// [idempotency.Do]: the message's key is claimed in the idempotency store
// that every consumer shares, the handler runs under the claim, and the
// router acknowledges the message only after the outcome is stored, or
// after the store failed to take it until the server's store timeout
// (docs/semantics/consumers.md, decision 270). Every
// broker watermill reaches (Kafka, AMQP, NATS, SQL, cloud queues) gets the
// guarantee.
//
// It replaces watermill's middleware.Deduplicator where a duplicate must
// never run: the Deduplicator keeps its keys in the process's memory and
// records a message before its handler runs, so a redelivery after a
// failed run, or to another process, is dropped or run again; this
// middleware's keys live in the shared store, and a key is settled only by
// the handler's outcome.
//
// It is a module of its own so that the core module requires no watermill.
// The guide is docs/consumers.md in the repository; the rules every
// consumer package follows are in docs/semantics/consumers.md (decisions 81 to 84,
// 127, 150, 154 to 158).
//
//	router.AddMiddleware(watermillidempotency.Middleware(idem))
//
// # Outcomes
//
// A run that succeeds stores the messages the handler returned (UUID,
// metadata, payload), and the router publishes them; a replay returns the
// same messages, with the same UUIDs, so that a redelivery after a lost
// ack publishes them again and their consumers deduplicate the copies by
// UUID (this middleware's default key). Each message is then settled by
// [idempotency.Server.Settle]:
//
//   - done, now or by an earlier delivery: the handler's messages are
//     returned, and the router publishes them and acks;
//   - the handler failed with an error the server does not store, or
//     panicked ([ErrHandlerPanicked]): the error is returned at once, and
//     the router nacks: the claim was released, and the redelivery runs
//     the handler again;
//   - the key is in flight on another delivery ([idempotency.ErrKeyInUse]),
//     or the store is unavailable or full: the middleware waits the retry
//     delay ([WithRetryDelay]) and returns the error, and the router nacks;
//   - final (the handler's stored error, on the delivery that ran it or
//     replayed to a later one; no key; a key reused for another payload):
//     watermill has no way to stop a redelivery but an ack, so the message
//     is handed to the dead-letter function ([WithDeadLetter]), if any,
//     and acked: no messages, no error.
//
// # Operations and keys
//
// The operation a message's key is claimed under is, by default, the name
// of the router's handler, so that two handlers of one message (a fan-out)
// each run once; [WithOperation] names it. A message is keyed by its UUID
// by default ([UUIDKey]), or by a business id in its metadata
// ([MetadataKey]). The payload is the request the key stands for: a key
// reused for another payload is refused with [idempotency.ErrKeyReused] and
// dead-lettered, not skipped.
package watermillidempotency
