// Package otelidempotency reports the decisions of the idempotency
// interceptors to OpenTelemetry: metrics through a MeterProvider, and
// attributes and events on the spans that otelgrpc (or any other
// instrumentation) puts in the call's context.
//
// It is a package of its own so that the core package imports no telemetry
// library. Its name follows the OpenTelemetry Go contrib packages (otelgrpc,
// otelhttp): "otel" and the name of the instrumented package.
//
// # Server
//
// [NewObserver] returns an [idempotency.Observer]. Chain otelgrpc's stats
// handler on the server so that each call has a span:
//
//	srv := grpc.NewServer(
//		grpc.StatsHandler(otelgrpc.NewServerHandler()),
//		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(store,
//			idempotency.WithObserver(otelidempotency.NewObserver()),
//		)),
//	)
//
// Every decision adds one to the decision counter and, when the decision
// made store calls, records their time in the store histogram. A store step
// retried through errors (storing an outcome, releasing a claim, renewing a
// lease) is one store_error decision however many attempts failed; the
// histogram records each failed attempt's own time. On the
// call's span (trace.SpanFromContext) it sets the outcome attribute, so the
// span ends with the call's last decision, the operation and the store key
// (a hash, which an operator looks up or purges; the client's own key is
// never recorded), and it adds an event for the moments worth a mark on the
// timeline: a replay, an in-flight rejection, a lease renewal and a lost
// lease.
//
// # Store
//
// [RegisterStoreMetrics] reports a store's entries and bytes by state as
// gauges, read from its Stats (a store.Inspector) at most once a minute
// ([WithStatsInterval]), in one process per store:
//
//	reg, err := otelidempotency.RegisterStoreMetrics(st)
//	if err != nil {
//		return err
//	}
//	defer reg.Unregister()
//
// [RegisterSealingMetrics] reports, in every process that seals
// (idempotency.WithSealing), the records a server sealed with each key
// ID, to watch each key against AES-GCM's bound of 2^32 records.
//
// [RegisterReplayCacheMetrics] reports, in every process whose server
// has a replay cache (idempotency.WithReplayCache), the cache's entries
// and bytes against its bounds, and the entries it evicted to make room.
//
// # Client
//
// [UnaryClientInterceptor] starts one span per logical call, chained before
// (outside) the idempotency client interceptor or any other retry layer:
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
//		grpc.WithChainUnaryInterceptor(
//			otelidempotency.UnaryClientInterceptor(),
//			idempotency.UnaryClientInterceptor(),
//		),
//	)
//
// Each attempt that the layers below it send (counted with grpc.OnFinish,
// so it works with any retry layer) is one child span of otelgrpc's; the
// call span gets the number of attempts and an event for each retry with
// its reason.
//
// # Names
//
// The rpc.* attributes follow the OpenTelemetry semantic conventions in the
// same form as otelgrpc: by default rpc.system.name and the fully qualified
// rpc.method ("payments.v1.Payments/Charge"); with
// OTEL_SEMCONV_STABILITY_OPT_IN=rpc/old, rpc.system, rpc.service
// ("payments.v1.Payments") and rpc.method ("Charge") split from the full
// method; with rpc/dup, both (the fully qualified rpc.method wins). Our own
// names are in the idempotency namespace.
//
// Metrics ([WithMeterProvider]; default otel.GetMeterProvider()):
//
//	name                                           instrument             unit        attributes
//	idempotency.server.decisions                   Int64Counter           {decision}  rpc.*, idempotency.outcome
//	idempotency.server.store.duration              Float64Histogram       s           rpc.*, idempotency.outcome
//	idempotency.store.entries                      Int64ObservableGauge   {entry}     idempotency.state, idempotency.estimated
//	idempotency.store.size                         Int64ObservableGauge   By          idempotency.state, idempotency.estimated
//	idempotency.server.sealed_records              Int64ObservableCounter {record}    idempotency.sealing.key_id
//	idempotency.server.replay_cache.entries        Int64ObservableGauge   {entry}     none
//	idempotency.server.replay_cache.entries.limit  Int64ObservableGauge   {entry}     none
//	idempotency.server.replay_cache.size           Int64ObservableGauge   By          none
//	idempotency.server.replay_cache.size.limit     Int64ObservableGauge   By          none
//	idempotency.server.replay_cache.evictions      Int64ObservableCounter {entry}     none
//
// The histogram records [idempotency.Event.StoreTime] of the decisions that
// made store calls (a missing or invalid key makes none), and of every
// failed attempt of a retried store step; the counter counts such a step's
// first failed attempt only ([idempotency.Event.Attempt] 1). The store
// gauges ([RegisterStoreMetrics]) have idempotency.state in_flight,
// abandoned (a claim's lease ran out before its outcome was stored: under
// a blocking policy, keys that refuse every call until an operator
// resolves them) or completed, and idempotency.estimated true when the store estimated its
// figures from a sample. The replay cache's evictions count the entries
// dropped, least recently used first, to make room under its bounds
// ([idempotency.ReplayCacheStats]): not those that expired or were
// purged.
//
// Server span (the span in the call's context, otelgrpc's server span):
//
//	name                           kind        value
//	idempotency.outcome            attribute   the idempotency.Decision's String(): executed, replayed, in_flight, ...
//	idempotency.operation          attribute   the method's namespace, the operation of Do, or the method
//	idempotency.store_key          attribute   the call's store key, once its key was read
//	idempotency.replayed           event       a stored outcome was replayed
//	idempotency.in_flight          event       a duplicate was rejected with ABORTED
//	idempotency.lease_renewed      event       the running handler's lease was renewed
//	idempotency.lease_lost         event       the running handler lost its claim
//
// Client call span ([WithTracerProvider]; default otel.GetTracerProvider()),
// named as gRFC A72 names the call span, "Sent.payments.v1.Payments.Charge",
// of kind internal since otelgrpc's attempt spans below it are the client
// spans:
//
//	name                           kind        value
//	rpc.*                          attributes  as above
//	rpc.response.status_code       attribute   the call's final gRPC code: "OK", "UNAVAILABLE", ...
//	idempotency.attempts           attribute   attempts sent (int)
//	idempotency.retry              event       an attempt failed and was retried; attributes
//	                                           idempotency.attempt (the failed attempt's number, int)
//	                                           and idempotency.retry.reason (the ErrorInfo reason in
//	                                           [idempotency.ErrorDomain], such as IDEMPOTENCY_KEY_IN_USE,
//	                                           else the gRPC code, such as UNAVAILABLE)
package otelidempotency
