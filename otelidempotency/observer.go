package otelidempotency

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/grpc-idempotency/idempotency"
)

// spanEvents are the decisions that add an event to the server span,
// besides setting its [OutcomeKey] attribute.
var spanEvents = []idempotency.Decision{
	idempotency.DecisionReplayed,
	idempotency.DecisionInFlight,
	idempotency.DecisionLeaseRenewed,
	idempotency.DecisionLeaseLost,
}

// storeBuckets are the store histogram's bucket bounds, in seconds: from
// 100 µs (a memory store, a Redis on the same host) to 10 s (the default
// store timeout).
var storeBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// NewObserver returns an [idempotency.Observer] that records each decision
// of the server interceptor: one in the [DecisionsMetric] counter, its store
// time in the [StoreDurationMetric] histogram when it made store calls, and
// on the span in the call's context the [OutcomeKey], [OperationKey] and
// (once the call's key was read) [StoreKeyKey] attributes and, for
// replays, in-flight rejections, lease renewals and lost leases, an event.
// The client's own key ([idempotency.Event.Key]) is never recorded.
// A store step retried through errors is one store_error decision however
// many attempts failed: the counter counts the event of its first attempt
// ([idempotency.Event.Attempt] 1), while the histogram records the time of
// every failed attempt, each once.
// Decisions are named by their String(), so decisions added to the library
// later are recorded without a change here. The package documentation has
// the table of names.
//
// Instruments come from the [WithMeterProvider] provider (default the
// global one). An error creating them goes to otel.Handle; the observer
// then uses what the provider returned, or a no-op instrument. Observe
// does not block, and once it has seen a method, operation and decision it
// allocates nothing of its own, but the store key's attribute on a
// recording span (measured by this package's benchmarks).
func NewObserver(opts ...Option) idempotency.Observer {
	c := newConfig(opts)
	meter := c.meterProvider.Meter(ScopeName)
	decisions, err := meter.Int64Counter(DecisionsMetric,
		metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of the idempotency server interceptor, by method and outcome."))
	handle(err)
	if decisions == nil {
		decisions = metricnoop.Int64Counter{}
	}
	storeTime, err := meter.Float64Histogram(StoreDurationMetric,
		metric.WithUnit("s"),
		metric.WithDescription("Time a decision of the idempotency server interceptor spent in store calls."),
		metric.WithExplicitBucketBoundaries(storeBuckets...))
	handle(err)
	if storeTime == nil {
		storeTime = metricnoop.Float64Histogram{}
	}
	o := &observer{semconv: c.semconv, decisions: decisions, storeTime: storeTime}
	o.names.Store(&map[decisionKey]*decisionNames{})
	return o
}

func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

type observer struct {
	semconv   semconvMode
	decisions metric.Int64Counter
	storeTime metric.Float64Histogram

	// names is copied on write, once per method and decision, so that the
	// hot path is one map read without locks or allocations.
	names atomic.Pointer[map[decisionKey]*decisionNames]
	mu    sync.Mutex // serialises writers of names
}

type decisionKey struct {
	method, operation string
	decision          idempotency.Decision
}

// decisionNames is what a decision records, built once per method,
// operation and decision.
type decisionNames struct {
	// add and record carry the attribute set (rpc.* and
	// idempotency.outcome), as slices so that no call allocates one.
	add    []metric.AddOption
	record []metric.RecordOption
	// span is idempotency.outcome and idempotency.operation, for the span.
	span  [2]attribute.KeyValue
	event string // "" when the decision adds no span event
}

// Observe implements [idempotency.Observer].
func (o *observer) Observe(ctx context.Context, e idempotency.Event) {
	n := o.namesOf(e.Method, e.Operation, e.Decision)
	if e.Attempt <= 1 { // a retry of a failed store step is not a new decision
		o.decisions.Add(ctx, 1, n.add...)
	}
	if e.StoreTime > 0 {
		o.storeTime.Record(ctx, e.StoreTime.Seconds(), n.record...)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(n.span[:]...)
	if e.StoreKey != "" {
		span.SetAttributes(StoreKeyKey.String(e.StoreKey))
	}
	if n.event != "" {
		span.AddEvent(n.event)
	}
}

func (o *observer) namesOf(method, operation string, d idempotency.Decision) *decisionNames {
	k := decisionKey{method, operation, d}
	if n, ok := (*o.names.Load())[k]; ok {
		return n
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.names.Load()
	if n, ok := old[k]; ok {
		return n
	}
	oa := OutcomeKey.String(d.String())
	set := metric.WithAttributeSet(attribute.NewSet(append(methodAttrs(o.semconv, method), oa)...))
	n := &decisionNames{add: []metric.AddOption{set}, record: []metric.RecordOption{set}, span: [2]attribute.KeyValue{oa, OperationKey.String(operation)}}
	if slices.Contains(spanEvents, d) {
		n.event = eventPrefix + d.String()
	}
	m := make(map[decisionKey]*decisionNames, len(old)+1)
	for key, v := range old {
		m[key] = v
	}
	m[k] = n
	o.names.Store(&m)
	return n
}
