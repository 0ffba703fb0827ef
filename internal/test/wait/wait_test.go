package wait_test

import (
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

// Until returns once the condition holds after a Notify, whichever
// goroutine changed the state, and checks the condition before it waits.
func TestSignalUntil(t *testing.T) {
	t.Parallel()
	var s wait.Signal
	var n atomic.Int64
	go func() {
		for range 100 {
			n.Add(1)
			s.Notify()
		}
	}()
	s.Until(t, "100 changes", func() bool { return n.Load() == 100 })
	s.Until(t, "a condition already true", func() bool { return true })
	if got := n.Load(); got != 100 {
		t.Fatalf("n = %d after Until, want 100", got)
	}
}

// For polls until the condition holds.
func TestFor(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	wait.For(t, func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3", got)
	}
}
