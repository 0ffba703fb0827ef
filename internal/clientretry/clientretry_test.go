package clientretry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/clientretry"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	fixed := func(d time.Duration) clientretry.Backoff {
		return func(context.Context, uint) time.Duration { return d }
	}
	tests := []struct {
		name     string
		backoff  clientretry.Backoff
		pushback time.Duration
		deadline time.Duration // 0: none
		want     time.Duration
		ok       bool
	}{
		{name: "backoff alone", backoff: fixed(time.Second), want: time.Second, ok: true},
		{name: "pushback longer", backoff: fixed(time.Millisecond), pushback: time.Second, want: time.Second, ok: true},
		{name: "backoff longer", backoff: fixed(2 * time.Second), pushback: time.Second, want: 2 * time.Second, ok: true},
		{name: "pushback at the cap", backoff: fixed(0), pushback: time.Minute, want: time.Minute, ok: true},
		{name: "pushback over the cap", backoff: fixed(0), pushback: time.Minute + 1},
		{name: "negative backoff", backoff: fixed(-time.Second), want: 0, ok: true},
		{name: "nil backoff", pushback: time.Second, want: time.Second, ok: true},
		{name: "wait ends after the deadline", backoff: fixed(time.Hour), deadline: time.Minute},
		{name: "wait ends before the deadline", backoff: fixed(time.Millisecond), deadline: time.Hour, want: time.Millisecond, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			got, ok := clientretry.Delay(ctx, tt.backoff, 1, tt.pushback, time.Minute)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Delay = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDelayPassesTheAttempt(t *testing.T) {
	t.Parallel()
	var got uint
	backoff := func(_ context.Context, attempt uint) time.Duration { got = attempt; return 0 }
	if _, ok := clientretry.Delay(t.Context(), backoff, 3, 0, time.Minute); !ok || got != 3 {
		t.Fatalf("backoff called with attempt %d, ok %v; want 3, true", got, ok)
	}
}

func TestFullJitterBounds(t *testing.T) {
	t.Parallel()
	b := clientretry.FullJitter(10*time.Millisecond, 50*time.Millisecond)
	for attempt := uint(1); attempt <= 10; attempt++ {
		for range 100 {
			d := b(t.Context(), attempt)
			limit := min(10*time.Millisecond<<attempt, 50*time.Millisecond)
			if d < 0 || d > limit {
				t.Fatalf("attempt %d: wait %v outside [0, %v]", attempt, d, limit)
			}
		}
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	if err := clientretry.Wait(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, d := range []time.Duration{0, time.Hour} {
		if err := clientretry.Wait(done, d); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait(%v) on a cancelled context = %v, want context.Canceled", d, err)
		}
	}
	// Cancelled during the wait.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(time.Millisecond, cancel)
	if err := clientretry.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled during the wait = %v, want context.Canceled", err)
	}
}
