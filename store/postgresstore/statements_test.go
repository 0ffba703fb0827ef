package postgresstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestPostgresStatementsPerCall counts, through the interceptor on a gRPC server,
// the statements a call sends to the store's table: an executed call two
// (the claim, then the complete, or CompleteTx inside the handler's
// transaction with no store call after the handler), a replay one (the
// claim, which found the completed key).
func TestPostgresStatementsPerCall(t *testing.T) {
	t.Parallel()
	echo := func(_ context.Context, _ *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
	}
	for _, tc := range []struct {
		name      string
		handler   txHandler
		completes int // the interceptor's Complete calls after the handler
	}{
		{"complete", echo, 1},
		{"complete in transaction", charge, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			trips := &pgtest.RoundTrips{}
			cfg := pgtest.Config(t, 4)
			cfg.ConnConfig.Tracer = trips
			pool := pgtest.PoolFrom(t, cfg)
			schema := newSchema(t, pool)
			trips.Match = pgx.Identifier{schema, "records"}.Sanitize()
			s := postgresstore.New(pool, postgresstore.WithTable(schema+".records"), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			tables.Store(s, schema+".records")
			f := newTxFixtureOn(t, s, pool, tc.handler)
			for i, want := range []int64{2, 1, 1} {
				trips.Reset()
				resp, err := f.client.Do(keyed(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"})
				if err != nil || resp.GetPayload() != "p" {
					t.Fatalf("call %d: %v, %v", i, resp, err)
				}
				if got := trips.Queries(); got != want {
					t.Fatalf("call %d sent %d statements to %s, want %d", i, got, trips.Match, want)
				}
			}
			if c, r := f.calls.Count("complete"), f.calls.Count("release"); c != tc.completes || r != 0 {
				t.Fatalf("the interceptor made %d Complete and %d Release calls after the handler, want %d and 0", c, r, tc.completes)
			}
		})
	}
}

// TestPostgresStatementsPerKeptClaim counts the statements the pool sends
// for the steps of a claim kept beyond its lease (store.ClaimOptions.Keep,
// with and without TakeOver): the claim of a free key is one statement, a
// replay (a claim that finds the key completed) one, and so are the
// Abandon, the claim that finds the key abandoned or takes it over, and the
// claim that finds it in flight: abandoned claims cost the executed and replay paths no
// round trip.
func TestPostgresStatementsPerKeptClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts store.ClaimOptions
	}{
		{"keep", store.ClaimOptions{Keep: time.Hour}},
		{"keep and take over", store.ClaimOptions{Keep: time.Hour, TakeOver: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			trips := &pgtest.RoundTrips{}
			cfg := pgtest.Config(t, 2)
			cfg.ConnConfig.Tracer = trips
			pool := pgtest.PoolFrom(t, cfg)
			s := postgresstore.New(pool, postgresstore.WithTable(newSchema(t, pool)+".records"), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			ctx, fp := t.Context(), []byte("fp")
			var c store.ClaimResult
			steps := []struct {
				name string
				step func() error
				want func() bool
			}{
				{"claim of a free key", func() (err error) { c, err = s.Claim(ctx, "k", fp, time.Hour, tc.opts); return err },
					func() bool { return c.Won() && c.Attempt == 1 }},
				{"complete", func() error { return s.Complete(ctx, "k", c.Token, []byte("out"), time.Hour) }, func() bool { return true }},
				{"replay", func() (err error) { c, err = s.Claim(ctx, "k", fp, time.Hour, tc.opts); return err },
					func() bool { return c.Existing.State == store.StateCompleted && string(c.Existing.Data) == "out" }},
				{"claim of another free key", func() (err error) { c, err = s.Claim(ctx, "a", fp, time.Hour, tc.opts); return err },
					func() bool { return c.Won() }}, //nolint:gocritic // c is assigned by the step: a method value would read the old one
				{"abandon", func() error { return s.Abandon(ctx, "a", c.Token) }, func() bool { return true }},
				{"claim of the abandoned key", func() (err error) { c, err = s.Claim(ctx, "a", fp, time.Hour, tc.opts); return err },
					func() bool {
						if tc.opts.TakeOver {
							return c.Won() && c.Attempt == 2
						}
						return c.Existing.State == store.StateAbandoned
					}},
				{"claim of the key again", func() (err error) { c, err = s.Claim(ctx, "a", fp, time.Hour, tc.opts); return err },
					func() bool {
						if tc.opts.TakeOver {
							return c.Existing.State == store.StateInFlight // taken over
						}
						return c.Existing.State == store.StateAbandoned
					}},
			}
			for _, st := range steps {
				trips.Reset()
				if err := st.step(); err != nil || !st.want() {
					t.Fatalf("%s: %+v, %v", st.name, c, err)
				}
				if got := trips.Queries(); got != 1 {
					t.Fatalf("%s sent %d statements, want 1", st.name, got)
				}
			}
		})
	}
}
