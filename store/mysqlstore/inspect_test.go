package mysqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// completeKey claims key and completes it with data.
func completeKey(t *testing.T, s *mysqlstore.Store, key string, data []byte) string {
	t.Helper()
	c, err := s.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim %q: %v, won=%v", key, err, c.Won())
	}
	if err := s.Complete(t.Context(), key, c.Token, data, time.Hour); err != nil {
		t.Fatal(err)
	}
	return c.Token
}

// TestInspectRoundTrips: Lookup, a page of List and Stats are each one
// statement, one round trip; Purge six, the SELECT of the entry, then, in
// one transaction, the DELETE fenced by what it read and the purge log's
// four: the lock of its head, the read of its last id, the INSERT of the
// purge, the trim of its old rows.
func TestInspectRoundTrips(t *testing.T) {
	t.Parallel()
	s, trips := countedStore(t)
	ctx := t.Context()
	completeKey(t, s, "k", []byte("data"))
	for _, step := range []struct {
		op   string
		run  func() error
		want []string
	}{
		{"Lookup", func() error { _, err := s.Lookup(ctx, "k"); return err }, []string{"lookup"}},
		{"List", func() error { _, err := s.List(ctx, store.ListOptions{}); return err }, []string{"listFirst"}},
		{"List next", func() error { _, err := s.List(ctx, store.ListOptions{Cursor: "m1:00"}); return err }, []string{"listNext"}},
		{"Stats", func() error { _, err := s.Stats(ctx); return err }, []string{"stats"}},
		{"Purge", func() error { _, err := s.Purge(ctx, "k", store.PurgeOptions{}); return err }, []string{"lookup", "purge", "logHead", "logNext", "logInsert", "logTrim"}},
	} {
		// A first run prepares the statements on the connection.
		completeKey(t, s, "warm-"+step.op, []byte("data"))
		trips.Reset()
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.op, err)
		}
		var got []string
		for _, n := range sent(s, trips) {
			if !strings.HasPrefix(n, "prepare ") { // statements a transaction sends prepare in the background
				got = append(got, n)
			}
		}
		if !slices.Equal(got, step.want) {
			t.Fatalf("%s sent %q, want %q", step.op, got, step.want)
		}
	}
}

// TestPurgeDoesNotWaitForAHandler: a Purge of a completed entry, the
// default, answers at once that the key is in flight while a transaction
// holds its row (a handler's, between CompleteTx and its commit): it
// decides on its read, and sends no DELETE.
func TestPurgeDoesNotWaitForAHandler(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 4)
	ctx := t.Context()
	c, err := s.Claim(ctx, "k", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "UPDATE "+tableOf(t, s)+" SET data = 'x' WHERE `key` = 'k'"); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.Purge(pctx, "k", store.PurgeOptions{}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("Purge while a transaction holds the row: %v, want store.ErrInFlight at once", err)
	}
	_ = tx.Rollback()
	if _, err := s.Purge(ctx, "k", store.PurgeOptions{InFlight: true, Token: c.Token}); err != nil {
		t.Fatal(err)
	}
}

// TestStatsExact: Stats counts the live rows and their bytes by state,
// as Lookup sizes them, and leaves expired rows out.
func TestStatsExact(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 2, mysqlstore.WithSweepInterval(0))
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
	time.Sleep(time.Millisecond)
	if got, err := s.Stats(ctx); err != nil || got != want {
		t.Fatalf("Stats = %+v, %v; want %+v", got, err, want)
	}
}

// TestInspectKeptExpires: Info.Expires of an entry claimed with Keep is
// the end of its lease while in flight, and the end of its Keep once
// abandoned; its Attempt counts the take-overs; Stats counts it by the
// state it is in.
func TestInspectKeptExpires(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 2, mysqlstore.WithSweepInterval(0))
	ctx := t.Context()
	within := func(what string, got time.Time, d time.Duration) {
		t.Helper()
		if want := time.Now().Add(d); got.Before(want.Add(-time.Minute)) || got.After(want.Add(time.Minute)) {
			t.Fatalf("%s: Expires %v, want about %v", what, got, want)
		}
	}
	lookup := func(want store.State, attempt int) store.Info {
		t.Helper()
		i, err := s.Lookup(ctx, "k")
		if err != nil || i.State != want || i.Attempt != attempt {
			t.Fatalf("Lookup: %+v, %v, want %v as attempt %d", i, err, want, attempt)
		}
		return i
	}
	stats := func(inFlight, abandoned int64) {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil || st.InFlight.Entries != inFlight || st.Abandoned.Entries != abandoned {
			t.Fatalf("Stats: %+v, %v, want %d in flight and %d abandoned", st, err, inFlight, abandoned)
		}
	}
	opts := store.ClaimOptions{Keep: 10 * time.Hour, TakeOver: true}
	c, err := s.Claim(ctx, "k", []byte("fp"), 5*time.Minute, opts)
	if err != nil || !c.Won() {
		t.Fatalf("Claim: %+v, %v", c, err)
	}
	within("in flight", lookup(store.StateInFlight, 1).Expires, 5*time.Minute)
	stats(1, 0)
	if err := s.Extend(ctx, "k", c.Token, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	within("extended", lookup(store.StateInFlight, 1).Expires, 20*time.Minute)
	if err := s.Abandon(ctx, "k", c.Token); err != nil {
		t.Fatal(err)
	}
	within("abandoned", lookup(store.StateAbandoned, 1).Expires, 10*time.Hour)
	stats(0, 1)
	if c, err = s.Claim(ctx, "k", []byte("fp"), 5*time.Minute, opts); err != nil || c.Attempt != 2 {
		t.Fatalf("take-over: %+v, %v", c, err)
	}
	within("taken over", lookup(store.StateInFlight, 2).Expires, 5*time.Minute)
	if err := s.Abandon(ctx, "k", c.Token); err != nil {
		t.Fatal(err)
	}
	within("abandoned again", lookup(store.StateAbandoned, 2).Expires, 10*time.Hour)
}
