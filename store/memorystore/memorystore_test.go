package memorystore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore returns a Store closed when t ends.
func newStore(t *testing.T, opts ...memorystore.Option) *memorystore.Store {
	t.Helper()
	s := memorystore.New(opts...)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []memorystore.Option
	}{
		// Defaults: the sweeper never runs during the suite, so expiry is
		// all lazy.
		{"Default", nil},
		// A sweeper that runs all the time races with every operation,
		// and the bound makes every path count entries (never full here).
		{"BoundedBusySweeper", []memorystore.Option{
			memorystore.WithSweepInterval(time.Millisecond),
			memorystore.WithMaxEntries(1 << 20),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, tc.opts...) })
		})
	}
}

func TestNonPositiveDurationsRejected(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), t.Context()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := s.Claim(ctx, "k", nil, d, store.ClaimOptions{}); err == nil {
			t.Errorf("Claim with lease %v: nil error", d)
		}
	}
	c, err := s.Claim(ctx, "k", nil, time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim: won=%v err=%v", c.Won(), err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if err := s.Extend(ctx, "k", c.Token, d); err == nil || errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Extend with lease %v: got %v, want an argument error", d, err)
		}
		if err := s.Complete(ctx, "k", c.Token, nil, d); err == nil || errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Complete with retention %v: got %v, want an argument error", d, err)
		}
	}
	// The refused calls changed nothing: the owner still owns the key.
	if err := s.Complete(ctx, "k", c.Token, []byte("ok"), time.Minute); err != nil {
		t.Fatalf("Complete after the refused calls: %v", err)
	}
}

func TestHugeTTLDoesNotOverflow(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), t.Context()
	const forever = time.Duration(1<<63 - 1)
	c, err := s.Claim(ctx, "k", nil, forever, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim: won=%v err=%v", c.Won(), err)
	}
	if c2, _ := s.Claim(ctx, "k", nil, time.Minute, store.ClaimOptions{}); c2.Won() {
		t.Fatal("a claim with the largest lease expired at once")
	}
	if err := s.Complete(ctx, "k", c.Token, []byte("x"), forever); err != nil {
		t.Fatal(err)
	}
	if c2, _ := s.Claim(ctx, "k", nil, time.Minute, store.ClaimOptions{}); c2.Existing.State != store.StateCompleted {
		t.Fatalf("completed with the largest retention: got %v", c2.Existing.State)
	}
}

func TestTokenSpellingsRefused(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), t.Context()
	var c store.ClaimResult
	// Claim until the token has a letter, so it has an upper-case spelling.
	for i := 0; !strings.ContainsAny(c.Token, "abcdefghijklmnopqrstuvwxyz"); i++ {
		var err error
		c, err = s.Claim(ctx, fmt.Sprint("k", i), nil, time.Minute, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim: won=%v err=%v", c.Won(), err)
		}
		if i > 10000 {
			t.Fatal("no token with a letter in 10000 claims")
		}
	}
	key := fmt.Sprint("k", s.Len()-1)
	for _, bad := range []string{strings.ToUpper(c.Token), "0" + c.Token, " " + c.Token, c.Token + " ", "zzzzzzzzzzzzzz"} {
		if err := s.Extend(ctx, key, bad, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Extend with token %q for owner token %q: got %v, want ErrLeaseLost", bad, c.Token, err)
		}
	}
	if err := s.Release(ctx, key, c.Token); err != nil {
		t.Fatalf("Release with the owner token: %v", err)
	}
}

func TestClaimReturnsSharedReadOnlyData(t *testing.T) {
	t.Parallel()
	// Documented: Claim does not copy; Complete does.
	s, ctx := newStore(t), t.Context()
	c, _ := s.Claim(ctx, "k", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err := s.Complete(ctx, "k", c.Token, []byte("data"), time.Minute); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Claim(ctx, "k", nil, time.Minute, store.ClaimOptions{})
	b, _ := s.Claim(ctx, "k", nil, time.Minute, store.ClaimOptions{})
	if &a.Existing.Data[0] != &b.Existing.Data[0] {
		t.Fatal("two Claims of a completed key returned different copies; the hot path should not copy")
	}
}

func TestConcurrentMixedKeys(t *testing.T) {
	t.Parallel()
	// Many goroutines over many keys, with a busy sweeper and a bound:
	// the entry count must come back to exactly what the maps hold.
	s := newStore(t, memorystore.WithSweepInterval(time.Millisecond), memorystore.WithMaxEntries(1<<20))
	ctx := t.Context()
	var wg sync.WaitGroup
	var completed atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprint("k", (i*7+w)%500)
				c, err := s.Claim(ctx, key, nil, time.Millisecond*time.Duration(1+i%3), store.ClaimOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				if !c.Won() {
					continue
				}
				switch i % 3 {
				case 0:
					_ = s.Release(ctx, key, c.Token)
				case 1:
					if s.Complete(ctx, key, c.Token, []byte("x"), time.Millisecond) == nil {
						completed.Add(1)
					}
				default:
					_ = s.Extend(ctx, key, c.Token, time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if completed.Load() == 0 {
		t.Fatal("no Complete landed")
	}
	// Everything expires within milliseconds; then the store is empty.
	eventually(t, func() bool { return s.Len() == 0 }, "expired entries swept")
}

// eventually polls cond for up to 5 seconds.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
