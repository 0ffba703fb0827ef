package testkit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

// Events is an [idempotency.Observer] that records every event, counts
// them per decision, and lets a test wait for a decision ([Events.Wait],
// [Events.Seen]) instead of polling. It is safe for concurrent use and
// cheap enough for a soak; the zero value is ready to use.
type Events struct {
	mu     sync.Mutex
	ev     []idempotency.Event
	counts map[idempotency.Decision]int
	seen   map[idempotency.Decision]chan struct{}
	signal wait.Signal
}

// Observe records ev.
func (e *Events) Observe(_ context.Context, ev idempotency.Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	if e.counts == nil {
		e.counts = make(map[idempotency.Decision]int)
	}
	e.counts[ev.Decision]++
	ch := e.seenLocked(ev.Decision)
	select {
	case <-ch:
	default:
		close(ch)
	}
	e.mu.Unlock()
	e.signal.Notify()
}

// All returns the events recorded so far, in order.
func (e *Events) All() []idempotency.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ev)
}

// Count returns how many recorded events have decision o.
func (e *Events) Count(o idempotency.Decision) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[o]
}

// Seen returns a channel closed once an event of decision o has been
// recorded, for a select (in a handler, say) beside other cases.
func (e *Events) Seen(o idempotency.Decision) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seenLocked(o)
}

// seenLocked returns the channel of decision o, creating it. Callers
// hold mu.
func (e *Events) seenLocked(o idempotency.Decision) chan struct{} {
	if e.seen == nil {
		e.seen = make(map[idempotency.Decision]chan struct{})
	}
	ch, ok := e.seen[o]
	if !ok {
		ch = make(chan struct{})
		e.seen[o] = ch
	}
	return ch
}

// Wait waits until n events of decision o in all have been recorded, and
// fails the test if that does not happen within [wait.Timeout].
func (e *Events) Wait(tb testing.TB, o idempotency.Decision, n int) {
	tb.Helper()
	e.signal.Until(tb, fmt.Sprintf("%d %s events", n, o), func() bool { return e.Count(o) >= n })
}

// String lists the decisions recorded and their counts, in the order of
// the Decision constants, as "executed=3 replayed=1", for logs.
func (e *Events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	decisions := make([]idempotency.Decision, 0, len(e.counts))
	for o := range e.counts {
		decisions = append(decisions, o)
	}
	slices.Sort(decisions)
	parts := make([]string, len(decisions))
	for i, o := range decisions {
		parts[i] = o.String() + "=" + strconv.Itoa(e.counts[o])
	}
	return strings.Join(parts, " ")
}
