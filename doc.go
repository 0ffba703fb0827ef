// Package idempotency makes unary, client-streaming and server-streaming
// gRPC calls safe to retry.
//
// A client sends an idempotency key in request metadata ([MetadataKey]). The
// server interceptor claims the key atomically in a [store.Store], runs the
// handler once, and stores its response or deterministic error. A retry with
// the same key gets the stored answer, marked with [ReplayedKey], without
// running the handler; a concurrent duplicate is held off with ABORTED; the
// same key with a different request is refused with FAILED_PRECONDITION.
//
// # Server
//
// [NewServer] takes a store and options, once; its interceptor and its
// start-up check read the same options:
//
//	idem := idempotency.NewServer(memorystore.New(), opts...)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))
//	// register the services, then
//	if err := idem.Validate(srv); err != nil {
//		log.Fatal(err)
//	}
//
// [UnaryServerInterceptor] is shorthand for a server without the check.
// [Server.StreamServerInterceptor] does the same for client-streaming and
// server-streaming methods, over the same options: a server stream is
// recorded message by message and replayed in order, and a retry may
// resume after the messages it has ([ResumeAfterKey]); bidirectional
// streams pass through.
//
// Methods are configured in their .proto files with the idempotency.v1.method
// option, for example
//
//	option (idempotency.v1.method) = { mode: MODE_REQUIRED, retention: { seconds: 172800 } };
//
// (fields mode, one of MODE_OPTIONAL, the default, MODE_REQUIRED or
// MODE_DISABLED; retention; lease; key_field; namespace); methods marked
// idempotency_level = NO_SIDE_EFFECTS are left untouched, and so are gRPC's
// own services (proto package grpc.*: health, reflection, channelz).
// [WithMethodPolicy] overrides a method's proto options in code;
// [WithDefaultMode] sets the mode of methods without the option
// (ModeDisabled: annotated methods only).
// [Server.Validate] checks at start-up every method a server serves. Keys are
// namespaced by method (or by the method's namespace, which survives
// renames: [MethodPolicy.Namespace]) and by the caller's scope
// ([WithScope]) and hashed before they reach the store. Errors carry google.rpc.ErrorInfo with
// [ErrorDomain] and one of the Reason constants, so clients branch on the
// reason, never on the message.
//
// Handlers that must fence their own side effects read their claim with
// [ClaimFromContext]. A store that shares a database with the handler's side
// effects records the outcome inside the handler's own transaction
// ([NewTxOutcome]). Handlers that call other systems taking idempotency
// keys send them keys derived from their claim ([DerivedKey], or
// [WithDerivedKeys] on the client they call through), the same on every
// run of the handler for one key, so a re-run after a crash replays the
// downstream call instead of making it twice.
//
// # Any function
//
// [Do] and [Once] run work that is not a gRPC handler (a message
// consumer, a webhook, a job) once per key, on the same protocol and
// options as the interceptor: Do replays the function's proto response or
// deterministic error, Once reports whether this call ran the function.
// [WithOperationPolicy] tunes one operation.
//
// # What runs once
//
// A handler runs once per key: once it has started under a claim, only its
// own retryable error or panic releases the claim. What can and cannot
// still run it twice, store by store, is in [SECURITY.md].
//
// # Client
//
// [UnaryClientInterceptor] mints one key per logical call (or takes it from
// the request field a key_field names) and retries UNAVAILABLE, ABORTED
// with [ReasonKeyInUse] and RESOURCE_EXHAUSTED with [ReasonStoreFull],
// always with the same key, honouring the server's pushback up to
// [WithMaxPushback]. [WithDefaultMode] leaves methods without the
// option alone.
// [WithKey] supplies the key for one call, through the interceptor only: a
// client without it puts the key in the outgoing context with
// [ContextWithKey]. [WithMetadataKey] and [WithDefaultMode] are [Option]s,
// valid on both sides, so a server and its clients can share one value.
// [Reason] returns the ErrorInfo reason of an error, to branch on
// ([ReasonKeyReused], [ReasonKeyInUse], ...). [Replayed] tells a replayed
// answer from the call's header and trailer, and [ReplayedInto] has the
// interceptor report it for the call's last attempt.
//
// # Stores
//
// [github.com/grpc-idempotency/idempotency/store/memorystore] keeps records
// in process, the default for one server.
// [github.com/grpc-idempotency/idempotency/store/redisstore] keeps them in
// Redis (single node, Sentinel or Cluster) so that many servers share them.
// [github.com/grpc-idempotency/idempotency/store/postgresstore] keeps them in
// PostgreSQL, and [github.com/grpc-idempotency/idempotency/store/mysqlstore]
// in MySQL or MariaDB, where a handler can also record its outcome inside
// its own transaction ([NewTxOutcome]).
// [github.com/grpc-idempotency/idempotency/store/migratestore] moves a
// service from one store to another without losing the keys in flight or
// the outcomes stored ([the operations guide] has the procedure).
//
// # Chaining
//
// On the server, place the interceptor after recovery, logging,
// authentication (so [WithScope] can read the principal) and request
// validation, just before the handler: a request that fails validation
// never claims its key, so the client can fix it and send it again with
// the same key. Validation there checks the request alone; checks that
// depend on state belong in the handler, whose answer is stored and
// replayed ([the chaining decisions] of the behaviour contract). A call
// wrapped by two interceptors over the same store with the same scope (a
// platform-wide chain and a service's own, or a selector) is claimed by
// the outer one only: the inner one finds the claim on the context and
// passes the call through. Over different stores, or with scopes that give
// different keys, each claims its own. On the client, place the key
// interceptor before any retry interceptor, so every retry carries the
// same key.
//
// [SECURITY.md]: https://github.com/grpc-idempotency/idempotency/blob/main/SECURITY.md#duplicate-execution-the-promise-store-by-store
// [the operations guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#moving-to-another-store
// [the chaining decisions]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/semantics.md#chaining-decisions
package idempotency
