package otelidempotency

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of the meter and tracer this
// package uses.
const ScopeName = "github.com/grpc-idempotency/idempotency/otelidempotency"

// Metric names.
const (
	// DecisionsMetric counts the server interceptor's decisions, by method
	// and decision, under [OutcomeKey] (Int64Counter, unit {decision}); a store step retried
	// through errors counts as one store_error.
	DecisionsMetric = "idempotency.server.decisions"
	// StoreDurationMetric is the time a decision spent in store calls, by
	// method and decision, under [OutcomeKey] (Float64Histogram, unit s).
	StoreDurationMetric = "idempotency.server.store.duration"
	// StoreEntriesMetric is the number of live entries of a store, by
	// [StateKey] and [EstimatedKey] (Int64ObservableGauge, unit {entry}),
	// reported by [RegisterStoreMetrics].
	StoreEntriesMetric = "idempotency.store.entries"
	// StoreSizeMetric is the bytes a store keeps for its live entries
	// ([store.Info.Size]), by [StateKey] and [EstimatedKey]
	// (Int64ObservableGauge, unit By), reported by [RegisterStoreMetrics].
	StoreSizeMetric = "idempotency.store.size"
	// SealedRecordsMetric is the number of records a server sealed, by
	// [SealingKeyIDKey], since its process started (Int64ObservableCounter,
	// unit {record}), reported by [RegisterSealingMetrics].
	SealedRecordsMetric = "idempotency.server.sealed_records"
	// ReplayCacheEntriesMetric is the number of entries of a server's
	// replay cache (Int64ObservableGauge, unit {entry}), reported by
	// [RegisterReplayCacheMetrics].
	ReplayCacheEntriesMetric = "idempotency.server.replay_cache.entries"
	// ReplayCacheEntriesLimitMetric is the most entries the cache holds
	// (Int64ObservableGauge, unit {entry}), reported by
	// [RegisterReplayCacheMetrics].
	ReplayCacheEntriesLimitMetric = "idempotency.server.replay_cache.entries.limit"
	// ReplayCacheSizeMetric is the bytes the cache's entries count against
	// its bound (Int64ObservableGauge, unit By), reported by
	// [RegisterReplayCacheMetrics].
	ReplayCacheSizeMetric = "idempotency.server.replay_cache.size"
	// ReplayCacheSizeLimitMetric is the most bytes the cache holds
	// (Int64ObservableGauge, unit By), reported by
	// [RegisterReplayCacheMetrics].
	ReplayCacheSizeLimitMetric = "idempotency.server.replay_cache.size.limit"
	// ReplayCacheEvictionsMetric is the number of entries the cache
	// evicted to make room under its bounds, since its process started
	// (Int64ObservableCounter, unit {entry}), reported by
	// [RegisterReplayCacheMetrics].
	ReplayCacheEvictionsMetric = "idempotency.server.replay_cache.evictions"
)

// Attribute keys of our own namespace.
const (
	// OutcomeKey is the decision, the [idempotency.Decision]'s String(): on
	// the metrics, and on the server span, where it ends as the call's last
	// decision. Its name, idempotency.outcome, predates the Go type's
	// rename to Decision and is kept for the dashboards that use it.
	OutcomeKey = attribute.Key("idempotency.outcome")
	// OperationKey is what the call's key belongs to, on the server span:
	// the method's namespace, the operation of Do and Once, or the full
	// method ([idempotency.Event.Operation]).
	OperationKey = attribute.Key("idempotency.operation")
	// StoreKeyKey is the call's store key on the server span, once its
	// key was read ([idempotency.Event.StoreKey]): a hash, safe to record,
	// that an operator looks up or purges. The client's own key is never
	// recorded.
	StoreKeyKey = attribute.Key("idempotency.store_key")
	// StateKey is the state of a store's entries on the store gauges:
	// "in_flight", "abandoned" or "completed" ([store.State]'s String()).
	StateKey = attribute.Key("idempotency.state")
	// EstimatedKey is true on the store gauges when the store estimated
	// its figures from a sample rather than counting them
	// ([store.Stats.Estimated]).
	EstimatedKey = attribute.Key("idempotency.estimated")
	// SealingKeyIDKey is the ID of a sealing key
	// ([idempotency.SealingKey]) on [SealedRecordsMetric]: the ID every
	// record it seals carries in the clear, never its secret.
	SealingKeyIDKey = attribute.Key("idempotency.sealing.key_id")
	// AttemptsKey is how many attempts a client call sent, on the call span.
	AttemptsKey = attribute.Key("idempotency.attempts")
	// AttemptKey is the number of the attempt that failed, on a
	// [RetryEvent].
	AttemptKey = attribute.Key("idempotency.attempt")
	// RetryReasonKey says why an attempt was retried, on a [RetryEvent]: the
	// google.rpc.ErrorInfo reason in [idempotency.ErrorDomain] when the error
	// carries one, else the gRPC code ("UNAVAILABLE").
	RetryReasonKey = attribute.Key("idempotency.retry.reason")
)

// RetryEvent is the name of the call span's event for an attempt that
// failed and was retried.
const RetryEvent = "idempotency.retry"

// eventPrefix names the server span's events: "idempotency." and the
// decision, for example "idempotency.replayed".
const eventPrefix = "idempotency."
