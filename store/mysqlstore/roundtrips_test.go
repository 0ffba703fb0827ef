package mysqlstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/mysqltest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
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
