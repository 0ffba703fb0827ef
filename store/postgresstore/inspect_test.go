package postgresstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// completeKey claims and completes key in s with data.
func completeKey(t *testing.T, s store.Store, key string, data []byte) string {
	t.Helper()
	c, err := s.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim(%q) = %+v, %v", key, c, err)
	}
	if err := s.Complete(t.Context(), key, c.Token, data, time.Minute); err != nil {
		t.Fatal(err)
	}
	return c.Token
}

// receive returns the next invalidation of ch, failing after 10 s.
func receive(t *testing.T, ch <-chan store.Invalidation) store.Invalidation {
	t.Helper()
	select {
	case inv, ok := <-ch:
		if !ok {
			t.Fatal("the channel closed")
		}
		return inv
	case <-time.After(10 * time.Second):
		t.Fatal("no invalidation within 10s")
	}
	return store.Invalidation{}
}

// TestInspectRoundTrips: Lookup, Purge, a page of List and Stats are each
// one statement, one round trip once prepared.
func TestInspectRoundTrips(t *testing.T) {
	t.Parallel()
	trips := &pgtest.RoundTrips{}
	cfg := pgtest.Config(t, 2)
	cfg.ConnConfig.Tracer = trips
	pool := pgtest.PoolFrom(t, cfg)
	schema := newSchema(t, pool)
	trips.Match = pgx.Identifier{schema, "records"}.Sanitize()
	s := postgresstore.New(pool, postgresstore.WithTable(schema+".records"), postgresstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	completeKey(t, s, "k", []byte("data"))
	for _, step := range []struct {
		op  string
		run func() error
	}{
		{"Lookup", func() error { _, err := s.Lookup(ctx, "k"); return err }},
		{"List", func() error { _, err := s.List(ctx, store.ListOptions{}); return err }},
		{"Stats", func() error { _, err := s.Stats(ctx); return err }},
		{"Purge", func() error { _, err := s.Purge(ctx, "k", store.PurgeOptions{}); return err }},
	} {
		trips.Reset()
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.op, err)
		}
		if got := trips.Queries(); got != 1 {
			t.Fatalf("%s sent %d statements, want 1", step.op, got)
		}
	}
}

// TestInvalidationsAcrossPools: a purge made by one server's store (a pool
// of its own) reaches a subscriber of another server's store on the same
// table.
func TestInvalidationsAcrossPools(t *testing.T) {
	t.Parallel()
	a, _ := newStore(t, 2)
	b := postgresstore.New(pgtest.Pool(t, 2), postgresstore.WithTable(tableOf(t, a)))
	t.Cleanup(func() { _ = b.Close() })
	ch, err := b.Invalidations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k", "\x00\xff binary", ""} {
		completeKey(t, a, key, []byte("data"))
		if _, err := a.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
			t.Fatal(err)
		}
		want := store.Invalidation{Key: key}
		if key == "" {
			want = store.Invalidation{All: true} // a payload cannot name the empty key
		}
		if inv := receive(t, ch); inv != want {
			t.Fatalf("got %+v, want %+v", inv, want)
		}
	}
	long := strings.Repeat("k", 4000) // over what a notification carries
	completeKey(t, a, long, []byte("data"))
	if _, err := a.Purge(t.Context(), long, store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	if inv := receive(t, ch); !inv.All {
		t.Fatalf("got %+v for the purge of a 4,000-byte key, want All", inv)
	}
}

// TestInvalidationsAfterReconnect: when the listening connection is cut,
// the subscription connects and listens again, tells the subscriber it may
// have missed purges (All), and delivers purges again.
func TestInvalidationsAfterReconnect(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, 2)
	ctx := t.Context()
	ch, err := s.Invalidations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	channel, err := postgresstore.ChannelOf(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var cut int
	err = pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN '||$1`, pgx.Identifier{channel}.Sanitize()).Scan(&cut)
	if err != nil || cut != 1 {
		t.Fatalf("terminated %d listening backends, %v; want 1", cut, err)
	}
	if inv := receive(t, ch); !inv.All {
		t.Fatalf("got %+v after the connection was cut, want All", inv)
	}
	completeKey(t, s, "k", []byte("data"))
	if _, err := s.Purge(ctx, "k", store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	if inv := receive(t, ch); inv.Key != "k" {
		t.Fatalf("got %+v, want the purge of k", inv)
	}
}

// TestPurgeDoesNotWaitForAHandler: a purge refused for an in-flight row
// does not wait for a transaction that holds the row for an update (a
// handler between CompleteTx and its commit): it reads the row with FOR
// KEY SHARE, which such a lock does not block.
func TestPurgeDoesNotWaitForAHandler(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, 4)
	ctx := t.Context()
	c, err := s.Claim(ctx, "k", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "UPDATE "+tableOf(t, s)+" SET expires_at = expires_at WHERE key = $1", []byte("k")); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.Purge(pctx, "k", store.PurgeOptions{}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("Purge while a transaction holds the row: %v, want store.ErrInFlight at once", err)
	}
	_ = tx.Rollback(ctx)
	if _, err := s.Purge(ctx, "k", store.PurgeOptions{InFlight: true, Token: c.Token}); err != nil {
		t.Fatal(err)
	}
}

// TestStatsExact: Stats counts the live rows and their bytes by state,
// as Lookup sizes them, and leaves expired rows out.
func TestStatsExact(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 2, postgresstore.WithSweepInterval(0))
	ctx := t.Context()
	var want store.Stats
	for _, key := range []string{"a", "b"} {
		completeKey(t, s, key, []byte("data of "+key))
		info, err := s.Lookup(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want.Completed.Entries++
		want.Completed.Bytes += info.Size
	}
	if _, err := s.Claim(ctx, "c", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	info, _ := s.Lookup(ctx, "c")
	want.InFlight = store.Count{Entries: 1, Bytes: info.Size}
	if _, err := s.Claim(ctx, "expired", []byte("fp"), time.Microsecond, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Stats(ctx); err != nil || got != want {
		t.Fatalf("Stats = %+v, %v; want %+v", got, err, want)
	}
}
