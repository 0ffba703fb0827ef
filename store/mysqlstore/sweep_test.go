package mysqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// fill writes n keys named prefix-i that expire after ttl: every other one
// a claim with a lease of ttl, the others completed with a retention of ttl
// (claimed with a minute's lease, so that a slow machine cannot lose it
// before the Complete).
func fill(t *testing.T, s *mysqlstore.Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		lease := ttl
		if i%2 == 0 {
			lease = time.Minute
		}
		c, err := s.Claim(t.Context(), key, []byte("fp"), lease)
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

func rows(t *testing.T, s *mysqlstore.Store) int {
	t.Helper()
	var n int
	if err := poolOf(t, s).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+tableOf(t, s)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSweepDeletesOnlyExpired: one Sweep deletes at most a batch of
// expired rows, in flight and completed, and never a live one.
func TestSweepDeletesOnlyExpired(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 4, mysqlstore.WithSweepInterval(0), mysqlstore.WithSweepBatch(30))
	fill(t, s, "short", 50, 100*time.Millisecond)
	fill(t, s, "long", 20, time.Hour)
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
	if n := rows(t, s); n != 20 {
		t.Fatalf("%d rows left, want the 20 live ones", n)
	}
	for i := range 20 {
		c, err := s.Claim(t.Context(), fmt.Sprintf("long-%d", i), []byte("fp"), time.Hour)
		if err != nil || c.Won() {
			t.Fatalf("live key long-%d after the sweep: won=%v err=%v", i, c.Won(), err)
		}
	}
}

// TestSweepersRaceOnManyServers: four servers, each on a pool of its own,
// sweep the same table at once while another claims and takes over
// expired keys, and a handler's transaction holds a live row after
// CompleteTx: together they delete every expired row exactly once, no
// live row, and none of them waits for the handler's transaction.
func TestSweepersRaceOnManyServers(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 8, mysqlstore.WithSweepInterval(0), mysqlstore.WithSweepBatch(25))
	const expired = 400
	fill(t, s, "old", expired, 50*time.Millisecond)
	fill(t, s, "held", 1, time.Hour)
	time.Sleep(200 * time.Millisecond)
	// A transaction holds the live row, as a handler's does after
	// CompleteTx until its commit.
	holder, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(t.Context(), "UPDATE "+tableOf(t, s)+" SET data = 'held' WHERE `key` = 'held-0'"); err != nil {
		t.Fatal(err)
	}

	var deleted atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		sweeper := mysqlstore.New(mysqltest.DB(t, 2), mysqlstore.WithTable(tableOf(t, s)), mysqlstore.WithSweepInterval(0), mysqlstore.WithSweepBatch(25))
		t.Cleanup(func() { _ = sweeper.Close() })
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
			c, err := s.Claim(t.Context(), fmt.Sprintf("old-%d", i), []byte("new"), time.Hour)
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
	_ = holder.Rollback()
	// A key taken over before the sweep reached it is live and kept; one
	// swept first was claimed anew. Either way it is one live row, beside
	// the held one.
	if got := rows(t, s); got != int(retaken.Load())+1 {
		t.Fatalf("%d rows left, want the %d keys claimed again and the held one", got, retaken.Load())
	}
	if d := deleted.Load(); d < expired-retaken.Load() || d > expired {
		t.Fatalf("sweepers deleted %d rows, want between %d and %d", d, expired-retaken.Load(), expired)
	}
}

// TestSweeperRunsInTheBackground: the store's own sweeper clears a backlog
// larger than a batch in one run, and Close stops it.
func TestSweeperRunsInTheBackground(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reports []int64
	s, _ := newStore(t, 4,
		mysqlstore.WithSweepInterval(100*time.Millisecond),
		mysqlstore.WithSweepBatch(40),
		mysqlstore.WithSweepReport(func(n int64, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			mu.Lock()
			reports = append(reports, n)
			mu.Unlock()
		}))
	fill(t, s, "k", 100, 50*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for rows(t, s) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d expired rows still there after 10s", rows(t, s))
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = s.Close()
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
