// Package jetstreamidempotency runs a NATS JetStream consumer's handler
// once per message, whatever the redeliveries, with [idempotency.Do]: the
// message's key is claimed in the idempotency store, the handler runs
// under the claim, and the message is acknowledged only after its outcome
// is stored, or the store failed to take it until the server's store
// timeout (docs/semantics/consumers.md, decision 270). Every instance of the consumer, in any process, shares the
// store, so the handler runs once among them.
//
// It is a module of its own so that the core module requires no NATS
// client. Its name pairs the ecosystem it adapts to with this library's,
// as otelidempotency does. The guide is docs/consumers.md in the
// repository; the rules every consumer package follows are in
// docs/semantics/consumers.md (decisions 81 to 84, 127, 150, 158).
//
// # Processing
//
// A [Processor] takes each delivery from a JetStream consumer
// ([Processor.Consume], or [Processor.Fetch] for a batch, processed
// message by message) and settles it by [idempotency.Server.Settle]:
//
//   - done, now or by an earlier delivery: Ack (a double ack, which waits
//     for the server's confirmation);
//   - the key is in flight on another delivery ([idempotency.ErrKeyInUse]),
//     or the store is unavailable or full: NakWithDelay ([WithRetryDelay]),
//     so the message comes back after the delay and finds the work done,
//     or runs it if the other delivery's claim was released or its lease
//     ran out;
//   - the handler failed with an error the idempotency server stores (its
//     WithStoredCodes, asked with [idempotency.Server.StoresError]), or the
//     delivery got such an error back without running: Term, whatever its
//     code, which stops redelivery and emits JetStream's MSG_TERMINATED
//     advisory for a dead-letter process ([WithAckStoredErrors] acks
//     instead);
//   - the handler failed with any other error, or panicked
//     ([ErrHandlerPanicked]): Nak, so the message is redelivered at once;
//     the claim was released, and the redelivery runs the handler again;
//   - the message cannot be processed at all (no key, or its key was used
//     for another body: [idempotency.ErrKeyReused]): Term.
//
// # Server versions
//
// The package needs nats-server 2.9.0 or later, as nats.go's jetstream
// package does. A term carries the error as its reason (TermWithReason,
// which the MSG_TERMINATED advisory passes on) only when [WithConn] gives
// the Processor the connection and its server is 2.10.4 or later: older
// servers ignore TermWithReason and would redeliver the message every
// AckWait, so they get a plain Term, whose advisory has no reason, and so
// does every server when WithConn is not given.
//
// # Holding a running message
//
// While the handler runs, the Processor tells JetStream that the message
// is in progress every third of the consumer's AckWait
// ([WithProgressEvery]), so a handler that runs longer than AckWait keeps
// its message. It stops when the handler returns or when the claim's
// lease is lost (the handler's context is then cancelled): the message can
// then be redelivered, and the claim decides who runs it.
//
// # Keys
//
// A message is keyed by its identity, never by its delivery: [MsgKey], the
// default, uses the publisher's Nats-Msg-Id, else the stream sequence;
// [HeaderKey] a business id in a header. The body is the request the key
// stands for: a key reused for another body is refused with
// [idempotency.ErrKeyReused] and terminated, not skipped.
package jetstreamidempotency
