package sqlitestore_test

import (
	"testing"
	"time"
)

// TestInvalidationsEndWithClose: a subscription whose context lives on
// ends when its store closes: the channel closes, and no poll outlives
// the store (its prepared statements closed).
func TestInvalidationsEndWithClose(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
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
