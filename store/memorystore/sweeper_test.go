package memorystore_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

func TestSweeperRemovesExpired(t *testing.T) {
	t.Parallel()
	s := newStore(t, memorystore.WithSweepInterval(5*time.Millisecond))
	ctx := t.Context()
	// More than one sweep batch per shard, so the batched walk runs.
	const short, long = 40000, 100
	for i := range short {
		if _, err := s.Claim(ctx, fmt.Sprint("short", i), nil, 30*time.Millisecond, store.ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range long {
		c, err := s.Claim(ctx, fmt.Sprint("long", i), nil, time.Minute, store.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.Complete(ctx, fmt.Sprint("long", i), c.Token, []byte("x"), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := s.Len(); n < long {
		t.Fatalf("Len = %d right after the claims, want at least %d", n, long)
	}
	eventually(t, func() bool { return s.Len() == long }, fmt.Sprintf("Len == %d once the short leases expired", long))
	// What is left is untouched.
	for i := range long {
		c, err := s.Claim(ctx, fmt.Sprint("long", i), nil, time.Minute, store.ClaimOptions{})
		if err != nil || c.Won() {
			t.Fatalf("long%d was removed: won=%v err=%v", i, c.Won(), err)
		}
	}
}

// Not parallel: goleak sees every goroutine of the process.
func TestCloseStopsSweeper(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := memorystore.New(memorystore.WithSweepInterval(time.Millisecond))
	if _, err := s.Claim(t.Context(), "k", nil, time.Millisecond, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// No sweeper: the expired entry stays until its key is touched.
	time.Sleep(20 * time.Millisecond)
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d after Close, want 1: something still sweeps", n)
	}
	// The store still works, with lazy expiry.
	if c, err := s.Claim(t.Context(), "k", nil, time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim after Close: won=%v err=%v", c.Won(), err)
	}
}

// Not parallel: goleak sees every goroutine of the process.
func TestDroppedStoreStopsSweeper(t *testing.T) {
	defer goleak.VerifyNone(t)
	func() {
		s := memorystore.New(memorystore.WithSweepInterval(time.Millisecond))
		_ = s
	}()
	// The runtime cleanup stops the sweeper once the Store is collected;
	// goleak retries for a while, and we help with GCs.
	for range 20 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}
