// Package wait is how tests wait: on a [Signal] that the thing watched
// raises when it changes (the test server's executions, the recorder of
// observer events), or, for state that nothing signals (keys in Redis,
// rows in PostgreSQL, a store's calls), by polling with [For]. Both fail
// the test after [Timeout] instead of waiting for go test's own.
package wait

import (
	"sync"
	"testing"
	"time"
)

// Timeout is how long a wait lasts before it fails the test.
const Timeout = 10 * time.Second

// For polls cond every millisecond until it holds, and fails the test if
// it does not within [Timeout]. Prefer a [Signal] where the state has an
// owner that can raise one.
func For(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("condition not met within %v", Timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Signal wakes the goroutines waiting in [Signal.Until] each time
// [Signal.Notify] is called, so that they check their condition again.
// Its zero value is ready to use; it costs nothing while no one waits.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next Notify; nil while no one waits
}

// Notify wakes every waiter. Call it after each change of the state that
// waiters' conditions read.
func (s *Signal) Notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// next returns the channel the next Notify closes.
func (s *Signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Until waits until cond holds, checking it at once and after each
// Notify, and fails the test if it does not within [Timeout]; what says
// what was awaited, for the failure message.
func (s *Signal) Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	s.UntilWithin(tb, what, Timeout, cond)
}

// UntilWithin is [Signal.Until] with a bound of its own, for a wait that
// [Timeout] is too short for (a broker's redelivery).
func (s *Signal) UntilWithin(tb testing.TB, what string, limit time.Duration, cond func() bool) {
	tb.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		changed := s.next() // taken before cond, so no Notify in between is missed
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			tb.Fatalf("%s: not within %v", what, limit)
		}
	}
}
