package testkit_test

import (
	"context"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// Events records every event in order, counts them per decision, closes
// Seen's channel at a decision's first event, and Wait returns once the
// count is reached.
func TestEvents(t *testing.T) {
	t.Parallel()
	var ev testkit.Events
	seen := ev.Seen(idempotency.DecisionReplayed)
	select {
	case <-seen:
		t.Fatal("Seen closed before any event")
	default:
	}
	go func() {
		for _, d := range []idempotency.Decision{idempotency.DecisionExecuted, idempotency.DecisionReplayed, idempotency.DecisionReplayed} {
			ev.Observe(context.Background(), idempotency.Event{Decision: d})
		}
	}()
	ev.Wait(t, idempotency.DecisionReplayed, 2)
	<-seen
	if n := ev.Count(idempotency.DecisionReplayed); n != 2 {
		t.Fatalf("Count(replayed) = %d, want 2", n)
	}
	if all := ev.All(); len(all) != 3 || all[0].Decision != idempotency.DecisionExecuted {
		t.Fatalf("All() = %v, want executed then two replays", all)
	}
	if got, want := ev.String(), "executed=1 replayed=2"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
