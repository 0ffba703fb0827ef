package pgtest

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips is a pgx tracer (pgx.QueryTracer and pgx.PrepareTracer) that
// counts the statements a pool sends whose SQL contains Match (every
// statement when Match is empty). Each statement is one round trip once it
// is prepared; a statement's first run on a connection prepares it, one
// round trip more, which Prepares counts. Set it as ConnConfig.Tracer.
type RoundTrips struct {
	// Match selects the statements counted, by a substring of their SQL.
	Match string

	queries, prepares atomic.Int64
}

// Queries returns how many matching statements were sent.
func (r *RoundTrips) Queries() int64 { return r.queries.Load() }

// Prepares returns how many matching statements were prepared.
func (r *RoundTrips) Prepares() int64 { return r.prepares.Load() }

// Reset sets both counts to zero.
func (r *RoundTrips) Reset() {
	r.queries.Store(0)
	r.prepares.Store(0)
}

// TraceQueryStart implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, r.Match) {
		r.queries.Add(1)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TracePrepareStart implements pgx.PrepareTracer.
func (r *RoundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	if strings.Contains(data.SQL, r.Match) {
		r.prepares.Add(1)
	}
	return ctx
}

// TracePrepareEnd implements pgx.PrepareTracer.
func (r *RoundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
