package httpidempotency_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/grpc-idempotency/idempotency"
)

// Many clients send one key at once: the handler runs once, every other
// client gets 409 with Retry-After while it runs, and a retry after it
// finished gets its answer replayed.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const clients = 16
	release := make(chan struct{})
	e := newEnv(t, setup{handler: func(w http.ResponseWriter, r *http.Request) {
		<-release // until every duplicate was refused
		created(w, r)
	}})
	answers := make(chan response, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() { answers <- e.post(t, "/orders", `{"amount":1999}`, "k") })
	}
	var won response
	for range clients - 1 { // the winner's answer waits for release
		r := <-answers
		p := wantProblem(t, r, http.StatusConflict, idempotency.ErrKeyInUse.Reason)
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Errorf("409 with Retry-After %q, want 1: %s", got, p.Detail)
		}
	}
	close(release)
	wg.Wait()
	if won = <-answers; won.Status != http.StatusCreated {
		t.Fatalf("winner: %d %s", won.Status, won.Body)
	}
	if r := e.post(t, "/orders", `{"amount":1999}`, "k"); r.Body != won.Body || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s, want a replay of %s", r.Status, r.Body, won.Body)
	}
	e.wantRuns(t, 1)
}
