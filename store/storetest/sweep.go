package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// SweepStore is a store with a sweeper of expired rows, as the SQL stores
// (mysqlstore, postgresstore, sqlitestore) have.
type SweepStore interface {
	store.Store
	// Sweep deletes one batch of expired rows and returns how many.
	Sweep(ctx context.Context) (int64, error)
	// Close stops the background sweeper and waits for it.
	Close() error
}

// SweepOptions are the sweeper's settings a case asks for.
type SweepOptions struct {
	Interval time.Duration      // the background sweeper's; zero turns it off
	Batch    int                // rows per sweep statement
	Report   func(int64, error) // called after each background sweep, or nil
	MaxConns int                // connections of the store's pool
}

// SweepRig is a store on a table of its own, as [RunSweep] drives it.
type SweepRig struct {
	// Store is the store the cases fill and sweep, closed when the test
	// ends.
	Store SweepStore
	// Rows counts the rows of the store's table, live or expired.
	Rows func(t *testing.T) int
	// Sweeper returns another store on the same table, as another
	// server's, on a pool of its own and with the background sweeper
	// off, closed when the test ends.
	Sweeper func(t *testing.T, batch int) SweepStore
	// Hold begins a transaction that holds the row of key (a live row),
	// as a handler's does after CompleteTx until its commit, and returns
	// its end (a rollback).
	Hold func(t *testing.T, key string) (end func())
}

// RunSweep runs the sweep suite: the cases every SQL store's sweeper
// passes, each a parallel subtest on a rig newRig makes for the options
// given.
func RunSweep(t *testing.T, newRig func(t *testing.T, o SweepOptions) SweepRig) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, func(*testing.T, SweepOptions) SweepRig)
	}{
		{"DeletesOnlyExpired", sweepDeletesOnlyExpired},
		{"RacesOnManyServers", sweepRacesOnManyServers},
		{"RunsInTheBackground", sweepRunsInTheBackground},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newRig)
		})
	}
}

// fillExpiring writes n keys named prefix-i that expire after ttl: every
// other one a claim with a lease of ttl, the others completed with a
// retention of ttl (claimed with a minute's lease, so that a slow machine
// cannot lose it before the Complete).
func fillExpiring(t *testing.T, s store.Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		lease := ttl
		if i%2 == 0 {
			lease = time.Minute
		}
		c, err := s.Claim(t.Context(), key, []byte("fp"), lease, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim %s: %v won=%v", key, err, c.Won())
		}
		if i%2 == 0 {
			if err := s.Complete(t.Context(), key, c.Token, []byte("data"), ttl); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sweepDeletesOnlyExpired: one Sweep deletes at most a batch of expired
// rows, in flight and completed, and never a live one.
func sweepDeletesOnlyExpired(t *testing.T, newRig func(*testing.T, SweepOptions) SweepRig) {
	r := newRig(t, SweepOptions{Batch: 30, MaxConns: 4})
	s := r.Store
	fillExpiring(t, s, "short", 50, 100*time.Millisecond)
	fillExpiring(t, s, "long", 20, time.Hour)
	time.Sleep(300 * time.Millisecond)
	var got []int64
	for {
		n, err := s.Sweep(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if n < 30 {
			break
		}
	}
	if fmt.Sprint(got) != "[30 20]" {
		t.Fatalf("batches deleted %v rows, want [30 20]", got)
	}
	if n := r.Rows(t); n != 20 {
		t.Fatalf("%d rows left, want the 20 live ones", n)
	}
	for i := range 20 {
		c, err := s.Claim(t.Context(), fmt.Sprintf("long-%d", i), []byte("fp"), time.Hour, store.ClaimOptions{})
		if err != nil || c.Won() {
			t.Fatalf("live key long-%d after the sweep: won=%v err=%v", i, c.Won(), err)
		}
	}
}

// sweepRacesOnManyServers: four servers, each on a pool of its own, sweep
// the same table at once while another claims and takes over expired
// keys, and a handler's transaction holds a live row after CompleteTx:
// together they delete every expired row exactly once, no live row, and
// none of them waits for the handler's transaction.
func sweepRacesOnManyServers(t *testing.T, newRig func(*testing.T, SweepOptions) SweepRig) {
	r := newRig(t, SweepOptions{Batch: 25, MaxConns: 8})
	s := r.Store
	const expired = 400
	fillExpiring(t, s, "old", expired, 50*time.Millisecond)
	fillExpiring(t, s, "held", 1, time.Hour)
	time.Sleep(200 * time.Millisecond)
	end := r.Hold(t, "held-0")
	defer end()

	var deleted atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		sweeper := r.Sweeper(t, 25)
		wg.Go(func() {
			for {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				n, err := sweeper.Sweep(ctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				deleted.Add(n)
				if n == 0 {
					return
				}
			}
		})
	}
	// Meanwhile, take over some expired keys: they are live again.
	var retaken atomic.Int64
	wg.Go(func() {
		for i := 0; i < expired; i += 10 {
			c, err := s.Claim(t.Context(), fmt.Sprintf("old-%d", i), []byte("new"), time.Hour, store.ClaimOptions{})
			if err != nil || !c.Won() {
				t.Errorf("Claim of an expired key: won=%v err=%v", c.Won(), err)
				return
			}
			retaken.Add(1)
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	end()
	// A key taken over before the sweep reached it is live and kept; one
	// swept first was claimed anew. Either way it is one live row, beside
	// the held one.
	if got := r.Rows(t); got != int(retaken.Load())+1 {
		t.Fatalf("%d rows left, want the %d keys claimed again and the held one", got, retaken.Load())
	}
	if d := deleted.Load(); d < expired-retaken.Load() || d > expired {
		t.Fatalf("sweepers deleted %d rows, want between %d and %d", d, expired-retaken.Load(), expired)
	}
}

// sweepRunsInTheBackground: the store's own sweeper clears a backlog
// larger than a batch in one run, and Close stops it.
func sweepRunsInTheBackground(t *testing.T, newRig func(*testing.T, SweepOptions) SweepRig) {
	var mu sync.Mutex
	var reports []int64
	r := newRig(t, SweepOptions{
		Interval: 100 * time.Millisecond,
		Batch:    40,
		MaxConns: 4,
		Report: func(n int64, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			mu.Lock()
			reports = append(reports, n)
			mu.Unlock()
		},
	})
	fillExpiring(t, r.Store, "k", 100, 50*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for r.Rows(t) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d expired rows still there after 10s", r.Rows(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = r.Store.Close()
	mu.Lock()
	defer mu.Unlock()
	var total int64
	for _, n := range reports {
		if n > 40 {
			t.Fatalf("a sweep deleted %d rows, over the batch of 40", n)
		}
		total += n
	}
	if total != 100 {
		t.Fatalf("sweeper reported %d rows deleted (%v), want 100", total, reports)
	}
}
