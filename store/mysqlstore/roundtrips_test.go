package mysqlstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// countedStore returns a store on a table of its own whose pool, of one
// connection, counts the statements sent to its table, and its counter.
func countedStore(t *testing.T, opts ...mysqlstore.Option) (*mysqlstore.Store, *mysqltest.RoundTrips) {
	t.Helper()
	table := newTableName()
	trips := &mysqltest.RoundTrips{Match: table}
	cfg := mysqltest.Config(t)
	trips.Install(cfg)
	s, _ := newStoreOn(t, mysqltest.DBFrom(t, cfg, 1), table, append([]mysqlstore.Option{mysqlstore.WithSweepInterval(0)}, opts...)...)
	return s, trips
}

// sent returns the names of the statements trips counted, in order, with
// "prepare " before the name of a statement prepared.
func sent(s *mysqlstore.Store, trips *mysqltest.RoundTrips) []string {
	byText := map[string]string{}
	for name, q := range mysqlstore.StatementNames(s) {
		byText[q] = name
	}
	var names []string
	for _, c := range trips.Commands() {
		name := byText[c.SQL]
		if name == "" {
			name = c.Kind + " " + c.SQL
		}
		switch c.Kind {
		case "prepare":
			names = append(names, "prepare "+name)
		case "execute", "query":
			names = append(names, name)
		}
	}
	return names
}

// TestRoundTrips: the statements, and so the round trips, of each path of
// each step, counted on the wire: a replay and an in-flight duplicate are
// one plain SELECT and nothing else; a new key is the SELECT and the
// INSERT; a takeover the SELECT and the UPDATE; Complete, Extend and
// Release one statement each, and one SELECT more only when they changed
// nothing (a resent Complete, a Release of a free key). Each statement is
// prepared once on the connection, and then only executed.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	s, trips := countedStore(t)
	ctx := t.Context()
	fp := []byte("fp")
	step := func(want []string, f func()) {
		t.Helper()
		trips.Reset()
		f()
		var got []string
		for _, n := range sent(s, trips) {
			if !strings.HasPrefix(n, "prepare ") {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("statements %q, want %q", got, want)
		}
	}
	claim := func(key string, lease time.Duration) store.ClaimResult {
		t.Helper()
		c, err := s.Claim(ctx, key, fp, lease, store.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var tok string
	step([]string{"read", "insert"}, func() { tok = claim("k", time.Minute).Token })
	step([]string{"read"}, func() {
		if c := claim("k", time.Minute); c.Won() || c.Existing.State != store.StateInFlight {
			t.Fatalf("in-flight duplicate won=%v %v", c.Won(), c.Existing.State)
		}
	})
	step([]string{"extend"}, func() {
		if err := s.Extend(ctx, "k", tok, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	step([]string{"complete"}, func() {
		if err := s.Complete(ctx, "k", tok, []byte("data"), time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	step([]string{"read"}, func() {
		if c := claim("k", time.Minute); c.Won() || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != "data" {
			t.Fatalf("replay won=%v %v %q", c.Won(), c.Existing.State, c.Existing.Data)
		}
	})
	step([]string{"complete", "completed"}, func() {
		if err := s.Complete(ctx, "k", tok, []byte("again"), time.Hour); err != nil {
			t.Fatalf("resent Complete: %v", err)
		}
	})
	step([]string{"release", "live"}, func() {
		if err := s.Release(ctx, "k", tok); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Release of a completed key: %v", err)
		}
	})
	step([]string{"read", "insert"}, func() { tok = claim("short", time.Millisecond).Token })
	time.Sleep(5 * time.Millisecond)
	step([]string{"read", "takeover"}, func() {
		if c := claim("short", time.Minute); !c.Won() {
			t.Fatal("the takeover of an expired claim lost")
		}
	})
	step([]string{"release", "live"}, func() {
		if err := s.Release(ctx, "short", tok); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Release with the token whose lease ran out: %v", err)
		}
	})
	step([]string{"read", "insert"}, func() { tok = claim("free", time.Minute).Token })
	step([]string{"release"}, func() {
		if err := s.Release(ctx, "free", tok); err != nil {
			t.Fatal(err)
		}
	})
	step([]string{"release", "live"}, func() {
		if err := s.Release(ctx, "free", tok); err != nil {
			t.Fatalf("second Release: %v", err)
		}
	})
	// Every statement was prepared once on the one connection.
	trips.Reset()
	claim("again", time.Minute)
	if n := trips.Count(); n != 2 {
		t.Fatalf("a claim of a new key on a warm connection took %d round trips (%q), want 2", n, sent(s, trips))
	}
}

// TestRoundTripsKept: a claim with Keep costs what a claim without it
// does (a new key the SELECT and the INSERT, a duplicate and a replay the
// SELECT alone), an abandoned key is found by the same SELECT, and a
// take-over of it is the SELECT and one UPDATE; Abandon is one statement,
// and one SELECT more when the entry was already abandoned, as is an
// Extend refused for it.
func TestRoundTripsKept(t *testing.T) {
	t.Parallel()
	s, trips := countedStore(t)
	ctx := t.Context()
	fp := []byte("fp")
	kept := store.ClaimOptions{Keep: time.Hour, TakeOver: true}
	step := func(want []string, f func()) {
		t.Helper()
		trips.Reset()
		f()
		var got []string
		for _, n := range sent(s, trips) {
			if !strings.HasPrefix(n, "prepare ") {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("statements %q, want %q", got, want)
		}
	}
	claim := func(fp []byte) store.ClaimResult {
		t.Helper()
		c, err := s.Claim(ctx, "k", fp, time.Minute, kept)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var first, second store.ClaimResult
	step([]string{"read", "insert"}, func() { first = claim(fp) })
	if !first.Won() || first.Attempt != 1 {
		t.Fatalf("kept claim of a free key: won=%v attempt %d", first.Won(), first.Attempt)
	}
	step([]string{"read"}, func() {
		if c := claim(fp); c.Won() || c.Existing.State != store.StateInFlight {
			t.Fatalf("take-over of a live claim won=%v %v", c.Won(), c.Existing.State)
		}
	})
	step([]string{"abandon"}, func() {
		if err := s.Abandon(ctx, "k", first.Token); err != nil {
			t.Fatal(err)
		}
	})
	step([]string{"read"}, func() {
		if c := claim([]byte("other")); c.Won() || c.Existing.State != store.StateAbandoned {
			t.Fatalf("take-over with another fingerprint won=%v %v", c.Won(), c.Existing.State)
		}
	})
	step([]string{"abandon", "owned"}, func() {
		if err := s.Abandon(ctx, "k", first.Token); err != nil {
			t.Fatalf("Abandon of an abandoned entry: %v", err)
		}
	})
	step([]string{"extend", "held"}, func() {
		if err := s.Extend(ctx, "k", first.Token, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Extend of an abandoned entry: %v", err)
		}
	})
	step([]string{"read", "resume"}, func() { second = claim(fp) })
	if prev, _ := store.TokenTime(first.Token); !second.Won() || second.Attempt != 2 || !second.Previous.Equal(prev) {
		t.Fatalf("take-over: won=%v attempt %d previous %v, want won as attempt 2 after %v", second.Won(), second.Attempt, second.Previous, prev)
	}
	step([]string{"complete"}, func() {
		if err := s.Complete(ctx, "k", second.Token, []byte("data"), time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	step([]string{"read"}, func() {
		if c := claim(fp); c.Won() || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != "data" {
			t.Fatalf("replay won=%v %v %q", c.Won(), c.Existing.State, c.Existing.Data)
		}
	})
	// Every statement was prepared once on the one connection.
	trips.Reset()
	if _, err := s.Claim(ctx, "again", fp, time.Minute, kept); err != nil {
		t.Fatal(err)
	}
	if n := trips.Count(); n != 2 {
		t.Fatalf("a kept claim of a new key on a warm connection took %d round trips (%q), want 2", n, sent(s, trips))
	}
}
