package idempotency

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// States of [nesting]: whether the claim's work runs, and whether a
// call nested in it has passed through under the claim.
const (
	nestClosed uint32 = iota // the work has not started, or has returned
	nestOpen                 // the work runs; no nested call has passed through
	nestTaken                // the work runs; a nested call has passed through
)

// claimedOutside reports whether ctx carries the claim of c's store key,
// taken in the same store by an outer interceptor (or [Do]) whose work is
// running: the call is wrapped twice (a platform-wide chain and a
// service's own, or a selector), or the work calls [Do] under its own
// operation (a method's namespace is an operation: decision 70), and the
// outer claim already covers it. The store key, not the method name,
// decides: it names the operation, the scope and the client's key. The
// inner interceptor then passes the call through, with no claim or store
// write of its own; claiming again would find the outer claim and refuse
// the call as in use. Interceptors over different stores, or whose scopes
// give different store keys, each claim their own.
//
// A nested [Do] with another fingerprint than the outer claim's is
// refused with [ErrKeyReused] while the outer work runs, as the store
// would refuse it: the key stands for the outer request. A nested
// interceptor's request is the outer call's (changed, at most, by an
// interceptor between the two), and its fingerprint may differ only by
// the two servers' fingerprint functions: it passes through.
//
// The outer claim covers one nested call: a second call with the key
// nested in the same work (a Do called twice inside a Do of its operation
// and key) gets [ErrKeyInUse], as the key is in flight. Once the outer
// work has returned, a context that still carries its claim (kept by a
// goroutine the work started) passes nothing through: the call claims as
// any other ([engine.run]), and replays the stored outcome.
func (e *engine) claimedOutside(ctx context.Context, c *call) (*call, error) {
	outer, ok := ctx.Value(claimKey{}).(*call)
	if !ok || outer.key != c.key || !sameStore(outer.e.store, e.store) {
		return nil, nil
	}
	var outerFP, ownFP [fingerprintSize]byte
	if c.ownRequest && !bytes.Equal(outer.requestFingerprint(&outerFP), c.requestFingerprint(&ownFP)) {
		if outer.nesting.working() {
			return outer, ErrKeyReused
		}
		return outer, errNotNested
	}
	return outer, outer.nesting.enter()
}

// nesting tracks the call nested under a claim ([engine.claimedOutside]):
// whether the claim's work runs, whether a nested call has passed through,
// and that call's end, which the claim waits for before it is settled, so
// that a nested call started by the work (in a goroutine of its own) never
// runs on after the claim is released.
type nesting struct {
	mu      sync.Mutex
	state   uint32
	running sync.WaitGroup
}

// open marks the claim's work as running.
func (n *nesting) open() { n.set(nestOpen) }

// close marks the claim's work as returned and waits for a nested call that
// passed through to end.
func (n *nesting) close() {
	n.set(nestClosed)
	n.running.Wait()
}

func (n *nesting) set(state uint32) {
	n.mu.Lock()
	n.state = state
	n.mu.Unlock()
}

// enter lets one nested call through while the work runs (the caller then
// calls leave), refuses a second with [ErrKeyInUse], and reports
// [errNotNested] once the work has returned.
func (n *nesting) enter() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch n.state {
	case nestOpen:
		n.state = nestTaken
		n.running.Add(1)
		return nil
	case nestTaken:
		return ErrKeyInUse
	}
	return errNotNested
}

// working reports whether the claim's work runs.
func (n *nesting) working() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state != nestClosed
}

// leave ends the nested call that enter let through.
func (n *nesting) leave() { n.running.Done() }

// errNotNested: the outer claim's work has returned; the call claims as
// any other.
var errNotNested = errors.New("idempotency: the outer claim's work has returned")

// sameStore reports whether a and b are the same store. A store value
// whose dynamic type is not comparable (a struct holding a slice or a map)
// is the same as no other, since == on it would panic.
func sameStore(a, b store.Store) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && a == b
}

// flights tracks the claims this process holds, so that same-process
// duplicates waiting under WithWaitForInFlight wake the moment the owner
// finishes instead of polling.
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// start registers key as running here and returns the function that marks
// it finished.
func (f *flights) start(key string) (done func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.m == nil {
		f.m = make(map[string]chan struct{})
	}
	f.m[key] = ch
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.m[key] == ch {
			delete(f.m, key)
		}
		f.mu.Unlock()
		close(ch)
	}
}

// wait blocks until key's local owner finishes, or, when the owner is in
// another process, until a backoff interval passes. It returns false when
// ctx ends or until passes first.
func (f *flights) wait(ctx context.Context, key string, until time.Time, attempt int) bool {
	f.mu.Lock()
	ch := f.m[key]
	f.mu.Unlock()
	remaining := time.Until(until)
	if remaining <= 0 {
		return false
	}
	if ch == nil {
		// Owned elsewhere: poll the store with capped exponential backoff.
		remaining = min(remaining, pollDelay(attempt))
	}
	t := time.NewTimer(remaining)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return time.Now().Before(until)
	case <-ctx.Done():
		return false
	}
}

func pollDelay(attempt int) time.Duration {
	const base, ceiling = 10 * time.Millisecond, 250 * time.Millisecond
	return min(base<<min(attempt, 5), ceiling)
}
