package idempotency

import (
	"context"
	"sync"
	"time"
)

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
