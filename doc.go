// Package idempotency makes unary, client-streaming and server-streaming
// gRPC calls safe to retry.
//
// A client sends an idempotency key in request metadata ([MetadataKey]). The
// server interceptor claims the key atomically in a [store.Store], runs the
// handler once, and stores its response or deterministic error. A retry with
// the same key gets the stored answer, marked with [ReplayedKey], without
// running the handler; a concurrent duplicate is held off with ABORTED; the
// same key with a different request is refused with FAILED_PRECONDITION.
// Once a handler has started under a claim, only its own retryable error or
// panic releases the claim: what can still run it twice, store by store, is
// in [SECURITY.md]. A key whose server died mid-call is taken over and run
// again by default, the handler told so by [Claim.Attempt];
// [WithAbandonedClaims] (AbandonBlock) refuses it with [ErrOutcomeUnknown]
// instead, and [MethodPolicy.Recover] finds out what the dead attempt did.
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
// [Server.StreamServerInterceptor] does the same for client-streaming and
// server-streaming methods ([the streaming guide]); [UnaryServerInterceptor]
// is shorthand for a server whose one entry point is the unary interceptor.
// Methods take part through the idempotency.v1.method proto option
// ([the proto guide]), [WithMethodPolicy] or [WithDefaultMode]. The rest is
// in [the server guide], and every situation's outcome in
// [the behaviour contract].
//
// # Any function
//
// [Do] and [Once] run work that is not a gRPC handler (a message consumer,
// a webhook, a job) once per key, on the same engine and options
// ([the functions guide]).
//
// # Client
//
// [UnaryClientInterceptor] and [StreamClientInterceptor] give each call one
// key and retry it with that key when that is safe ([the client guide]).
// Every failure the library answers a call with is one of its sentinels,
// each an [*Error]: branch with errors.Is(err, ErrKeyReused), on what the
// client interceptors and [Do] return alike; the sentinel's Reason is the
// google.rpc.ErrorInfo reason on the wire, which [Reason] reads from any
// error.
//
// # Stores
//
// [github.com/grpc-idempotency/idempotency/store/memorystore] keeps records
// in process, the default for one server.
// [github.com/grpc-idempotency/idempotency/store/redisstore] keeps them in
// Redis (single node, Sentinel or Cluster) so that many servers share them.
// [github.com/grpc-idempotency/idempotency/store/postgresstore] keeps them in
// PostgreSQL, and [github.com/grpc-idempotency/idempotency/store/mysqlstore]
// in MySQL or MariaDB, and [github.com/grpc-idempotency/idempotency/store/sqlitestore]
// in a SQLite file on one machine, shared by its processes; on each a
// handler can also record its outcome inside its own transaction
// ([NewTxOutcome]) ([the stores guide]).
// [github.com/grpc-idempotency/idempotency/store/migratestore] moves a
// service from one store that outlives its processes to another ([the
// operations guide]); nothing carries the memory store's keys through a
// restart.
// [Server.StoreKey] gives the store key of a client's key, and
// [github.com/grpc-idempotency/idempotency/admin] serves an operator's
// lookups, listings and purges over gRPC.
//
// # Chaining
//
// On the server, place the interceptor after recovery, logging,
// authentication (so [WithScope] can read the principal) and request
// validation, just before the handler; on the client, the key interceptor
// before any retry interceptor ([the chaining decisions]).
//
// [SECURITY.md]: https://github.com/grpc-idempotency/idempotency/blob/main/SECURITY.md#duplicate-execution-the-promise-store-by-store
// [the streaming guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/streaming.md
// [the proto guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/proto.md
// [the server guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/server.md
// [the behaviour contract]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/semantics/README.md
// [the functions guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/functions.md
// [the client guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/client.md
// [the stores guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/stores.md
// [the operations guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#moving-to-another-store
// [the chaining decisions]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/semantics/operations.md#chaining-decisions
package idempotency
