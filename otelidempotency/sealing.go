package otelidempotency

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/grpc-idempotency/idempotency"
)

// RegisterSealingMetrics reports how many records srv has sealed with each
// key ([idempotency.Server.SealedRecords]) as a cumulative counter
// ([SealedRecordsMetric]) under [SealingKeyIDKey], read when a reader
// collects it, so that an operator can watch the AES-GCM bound of a key:
// 2^32 records sealed with random 96-bit nonces (NIST SP 800-38D).
//
// Each process counts what it sealed since it started, and its count
// starts again from 0 when it restarts. Register it in every process that
// seals, and sum in the metrics backend, over the processes and over
// restarts (a rate or increase function handles the resets), the records
// a key sealed since it became the primary: that sum is what the bound
// is about, and it counts each scope's derived key at most once per
// record, so it is an upper bound for every scope. Rotate the primary
// well before the sum reaches 2^32 (an alert at 2^30 leaves time). A
// server without sealing reports nothing.
//
// The instrument comes from the [WithMeterProvider] provider (default the
// global one). Unregister the returned registration to stop reporting.
func RegisterSealingMetrics(srv *idempotency.Server, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	meter := c.meterProvider.Meter(ScopeName)
	sealed, err := meter.Int64ObservableCounter(SealedRecordsMetric,
		metric.WithUnit("{record}"),
		metric.WithDescription("Records the idempotency server sealed, by sealing key ID, since the process started."))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for id, n := range srv.SealedRecords() {
			o.ObserveInt64(sealed, int64(min(n, 1<<63-1)), metric.WithAttributeSet(attribute.NewSet(SealingKeyIDKey.String(id))))
		}
		return nil
	}, sealed)
}
