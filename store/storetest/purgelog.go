package storetest

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// PurgeLogStore is a store whose purges reach its subscribers through a
// log of purges it polls, as mysqlstore's and sqlitestore's do.
type PurgeLogStore interface {
	store.Store
	store.Inspector
	store.Invalidator
}

// PurgeLogInstance is one instance of a store over the rig's backend, as
// another server's or another process's.
type PurgeLogInstance struct {
	// Store is the instance, on a pool of its own, closed when the test
	// ends, that polls its log every few milliseconds.
	Store PurgeLogStore
	// Pause keeps the instance's pool from running any statement (it
	// holds the pool's only connection) until resume is called.
	Pause func(t *testing.T) (resume func())
}

// PurgeLogRig is a backend (a table, a database file) of a store whose
// purges a log carries, as [RunPurgeLog] drives it.
type PurgeLogRig struct {
	// Open returns a new instance on the backend.
	Open func(t *testing.T) PurgeLogInstance
	// Age makes every row of the backend's purge log older than the log
	// keeps its rows, so that the next purge deletes them.
	Age func(t *testing.T)
}

// PausePool returns a [PurgeLogInstance.Pause] for a store on db, a pool
// of one connection: it takes the connection, and gives it back on resume.
func PausePool(db *sql.DB) func(t *testing.T) (resume func()) {
	return func(t *testing.T) func() {
		conn, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return func() { _ = conn.Close() }
	}
}

// CheckLogAdded checks stores on a backend made by an earlier release,
// without a purge log: a purge of a completed key through s fails and
// keeps the key; then migrate (the stores' Migrate) runs, and a purge
// through s reaches sub's subscription.
func CheckLogAdded(t *testing.T, s, sub PurgeLogStore, migrate func(t *testing.T)) {
	t.Helper()
	completeKeys(t, s, "k")
	if _, err := s.Purge(t.Context(), "k", store.PurgeOptions{}); err == nil {
		t.Fatal("Purge without a purge log succeeded")
	}
	if _, err := s.Lookup(t.Context(), "k"); err != nil {
		t.Fatalf("the key after a failed purge: %v, want it kept", err)
	}
	migrate(t)
	ch := subscribe(t, sub)
	purgeKeys(t, s, "k")
	if inv := receive(t, ch); inv.All || inv.Key != "k" {
		t.Fatalf("got %+v, want the purge of k", inv)
	}
}

// CheckEndsWithClose checks that a subscription of s whose context lives
// on ends when s closes: the channel closes, and no poll outlives the
// store.
func CheckEndsWithClose(t *testing.T, s interface {
	store.Invalidator
	Close() error
}) {
	t.Helper()
	ch, err := s.Invalidations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-ch:
		if open {
			t.Fatal("an invalidation arrived after Close; want the channel closed")
		}
	case <-time.After(10 * time.Second): // a bound on failure, not a wait for success
		t.Fatal("the subscription outlived its store's Close")
	}
}

// RunPurgeLog runs the purge log suite: the cases every store whose
// purges a polled log carries passes, each a parallel subtest on a
// backend of its own that newRig makes.
func RunPurgeLog(t *testing.T, newRig func(t *testing.T) PurgeLogRig) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, PurgeLogRig)
	}{
		{"ReachesOtherInstances", purgeLogReachesOtherInstances},
		{"TrimmedUnreadSendsAll", purgeLogTrimmedUnreadSendsAll},
		{"ConcurrentPurgesAllDelivered", purgeLogConcurrentPurges},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newRig(t))
		})
	}
}

// logDelivery bounds the wait for an invalidation of the log suite.
const logDelivery = 30 * time.Second

// completeKeys claims and completes each key through s.
func completeKeys(t *testing.T, s store.Store, keys ...string) {
	t.Helper()
	for _, key := range keys {
		c, err := s.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim %s: %+v, %v", key, c, err)
		}
		if err := s.Complete(t.Context(), key, c.Token, []byte("done"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
}

// purgeKeys purges each key through s.
func purgeKeys(t *testing.T, s store.Inspector, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if _, err := s.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
			t.Fatalf("Purge %s: %v", key, err)
		}
	}
}

// subscribe subscribes to s's purges until the test ends.
func subscribe(t *testing.T, s store.Invalidator) <-chan store.Invalidation {
	t.Helper()
	ch, err := s.Invalidations(t.Context())
	if err != nil {
		t.Fatalf("Invalidations: %v", err)
	}
	return ch
}

// receive returns the next invalidation of ch.
func receive(t *testing.T, ch <-chan store.Invalidation) store.Invalidation {
	t.Helper()
	select {
	case inv, ok := <-ch:
		if !ok {
			t.Fatal("the Invalidations channel closed")
		}
		return inv
	case <-time.After(logDelivery):
		t.Fatalf("no invalidation within %v", logDelivery)
	}
	return store.Invalidation{}
}

// purgeLogReachesOtherInstances: a purge through one instance reaches the
// subscription of another, over the same backend, as the key (not All).
func purgeLogReachesOtherInstances(t *testing.T, r PurgeLogRig) {
	a, b := r.Open(t).Store, r.Open(t).Store
	ch := subscribe(t, a)
	key := t.Name() + "\x00\xff"
	completeKeys(t, b, key)
	purgeKeys(t, b, key)
	if inv := receive(t, ch); inv.All || inv.Key != key {
		t.Fatalf("got %+v, want the purge of %q", inv, key)
	}
}

// purgeLogTrimmedUnreadSendsAll: a subscription that could not read the
// log (its pool held) while purges it had not read were trimmed from it
// (aged, then a later purge deletes them) delivers All, never the later
// purge alone as if nothing had been missed.
func purgeLogTrimmedUnreadSendsAll(t *testing.T, r PurgeLogRig) {
	sub, other := r.Open(t), r.Open(t).Store
	ch := subscribe(t, sub.Store)
	keys := []string{t.Name() + "/0", t.Name() + "/1", t.Name() + "/2"}
	completeKeys(t, other, keys...)
	resume := sub.Pause(t)
	purgeKeys(t, other, keys[:2]...)
	r.Age(t)
	purgeKeys(t, other, keys[2]) // deletes the aged rows of the first two
	resume()
	if inv := receive(t, ch); !inv.All {
		t.Fatalf("got %+v, want All: the purges of %q were trimmed unread", inv, keys[:2])
	}
}

// purgeLogConcurrentPurges: four instances purge 25 keys each, all at
// once; a fifth's subscription delivers every key, and no All (no purge
// was missed, so none may be reported missed).
func purgeLogConcurrentPurges(t *testing.T, r PurgeLogRig) {
	const instances, each = 4, 25
	sub := r.Open(t).Store
	ch := subscribe(t, sub)
	want := make(map[string]bool)
	purgers := make([]store.Inspector, instances)
	batches := make([][]string, instances)
	for i := range purgers {
		s := r.Open(t).Store
		purgers[i] = s
		for j := range each {
			batches[i] = append(batches[i], fmt.Sprintf("%s/%d-%d", t.Name(), i, j))
		}
		completeKeys(t, s, batches[i]...)
		for _, k := range batches[i] {
			want[k] = true
		}
	}
	var wg sync.WaitGroup
	for i, s := range purgers {
		wg.Go(func() {
			for _, key := range batches[i] {
				if _, err := s.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
					t.Errorf("Purge %s: %v", key, err)
					return
				}
			}
		})
	}
	for len(want) > 0 && !t.Failed() {
		inv := receive(t, ch)
		if inv.All {
			t.Fatalf("All with %d purges undelivered; want each key", len(want))
		}
		delete(want, inv.Key)
	}
	wg.Wait()
}
