package mysqlstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// stormStores returns n stores on one table, each on a pool of its own, as
// n servers would have.
func stormStores(t *testing.T, n int) []*mysqlstore.Store {
	t.Helper()
	first, _ := newStore(t, 4, mysqlstore.WithSweepInterval(0))
	stores := []*mysqlstore.Store{first}
	for range n - 1 {
		s := mysqlstore.New(mysqltest.DB(t, 4), mysqlstore.WithTable(tableOf(t, first)), mysqlstore.WithSweepInterval(0))
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	return stores
}

// TestClaimStormAcrossStores: 8 stores, each on a pool of its own, and 8
// goroutines on each claim the same key at once, round after round, each
// with a fingerprint of its own: half the keys new, half holding a claim
// whose lease has run out. Exactly one of the 64 wins each round, and
// every other one sees the winner's claim in flight with the winner's
// fingerprint.
func TestClaimStormAcrossStores(t *testing.T) {
	t.Parallel()
	const servers, perServer, rounds = 8, 8, 40
	stores := stormStores(t, servers)
	ctx := t.Context()
	for r := range rounds {
		key := "storm-" + strconv.Itoa(r)
		if r%2 == 1 {
			if c, err := stores[0].Claim(ctx, key, []byte("dead server"), time.Millisecond, store.ClaimOptions{}); err != nil || !c.Won() {
				t.Fatalf("round %d: %v", r, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		results := make([]store.ClaimResult, servers*perServer)
		errs := make([]error, len(results))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				<-start
				results[i], errs[i] = stores[i%servers].Claim(ctx, key, []byte("claimer-"+strconv.Itoa(i)), time.Minute, store.ClaimOptions{})
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		winner := -1
		for i, c := range results {
			if c.Won() {
				if winner >= 0 {
					t.Fatalf("round %d: two winners, claimers %d and %d", r, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner", r)
		}
		want := []byte("claimer-" + strconv.Itoa(winner))
		for i, c := range results {
			if i != winner && (c.Existing.State != store.StateInFlight || !bytes.Equal(c.Existing.Fingerprint, want)) {
				t.Fatalf("round %d: claimer %d sees %v %q, want the winner's claim in flight", r, i, c.Existing.State, c.Existing.Fingerprint)
			}
		}
	}
}

// TestLeaseStormAcrossStores: on 8 stores of their own pools, 32 workers
// go after 16 keys until each is completed: a worker that wins a key holds
// it for up to 80 ms, often past its 30 ms lease, and then completes it
// with data naming itself, while the others take over the leases that
// run out. Each key is completed exactly once, with the data of the one
// Complete that succeeded; every late Complete is refused with
// ErrLeaseLost.
func TestLeaseStormAcrossStores(t *testing.T) {
	t.Parallel()
	const servers, workers, keys = 8, 32, 16
	const lease = 30 * time.Millisecond
	stores := stormStores(t, servers)
	ctx := t.Context()
	var completes [keys]atomic.Int64
	var winners [keys]atomic.Value // the data of the Complete that succeeded
	var wins, lost atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			s := stores[w%servers]
			for k := range keys {
				key := fmt.Sprintf("lease-storm-%d", k)
				for {
					c, err := s.Claim(ctx, key, []byte("fp"), lease, store.ClaimOptions{})
					if err != nil {
						t.Error(err)
						return
					}
					if !c.Won() {
						if c.Existing.State == store.StateCompleted {
							break
						}
						time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
						continue
					}
					wins.Add(1)
					time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
					data := fmt.Appendf(nil, "worker %d", w)
					switch err := s.Complete(ctx, key, c.Token, data, time.Hour); {
					case err == nil:
						completes[k].Add(1)
						winners[k].Store(data)
					case errors.Is(err, store.ErrLeaseLost):
						lost.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		key := fmt.Sprintf("lease-storm-%d", k)
		if n := completes[k].Load(); n != 1 {
			t.Errorf("%s completed %d times, want exactly once", key, n)
			continue
		}
		c, err := stores[0].Claim(ctx, key, []byte("fp"), lease, store.ClaimOptions{})
		if err != nil || c.Won() || !bytes.Equal(c.Existing.Data, winners[k].Load().([]byte)) {
			t.Errorf("%s holds %q (won=%v, %v), want the data of its one Complete %q", key, c.Existing.Data, c.Won(), err, winners[k].Load())
		}
	}
	if lost.Load() == 0 {
		t.Errorf("%d claims won and no Complete came after its lease: the storm took over nothing", wins.Load())
	}
	t.Logf("%d claims won, %d Completes refused after their lease ran out", wins.Load(), lost.Load())
}
