package main

import (
	"context"
	"log/slog"

	"github.com/grpc-idempotency/idempotency"
)

// newObserver returns the idempotency observer of the example: it logs
// every decision through slog and counts it in m. The library itself
// imports neither; this function is all the glue there is.
func newObserver(logger *slog.Logger, m *meter) idempotency.Observer {
	return idempotency.ObserverFunc(func(ctx context.Context, e idempotency.Event) {
		m.record(e)
		attrs := []slog.Attr{
			slog.String("method", e.Method),
			slog.String("outcome", e.Decision.String()),
			slog.Duration("store_time", e.StoreTime),
		}
		if p, ok := principalFrom(ctx); ok {
			attrs = append(attrs, slog.String("principal", p))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.Any("err", e.Err))
		}
		logger.LogAttrs(ctx, levelOf(e.Decision), "idempotency decision", attrs...)
	})
}

// levelOf ranks decisions: lease renewals are routine, the decisions that
// point at a sick store or a lost claim are warnings, the rest is the
// normal life of keys.
func levelOf(d idempotency.Decision) slog.Level {
	switch d {
	case idempotency.DecisionLeaseRenewed:
		return slog.LevelDebug
	case idempotency.DecisionStoreError, idempotency.DecisionFailOpen, idempotency.DecisionLeaseLost,
		idempotency.DecisionRecordCorrupt, idempotency.DecisionStoreFull:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
