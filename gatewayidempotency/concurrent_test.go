package gatewayidempotency_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
)

// Ten identical requests at once over HTTP: the handler runs once, and
// every request ends with its answer, the others marked replayed. Without
// waiting, duplicates get 409 with Retry-After and retry as an HTTP client
// following the draft would; with WithWaitForInFlight they wait for it.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const duplicates = 10
	const slow = `{"payload":"charge","amount":"500","sleep":"0.2s"}`
	tests := []struct {
		name      string
		server    []idempotency.ServerOption
		conflicts bool // whether some requests may get 409 first
	}{
		{"rejected, then retried", []idempotency.ServerOption{idempotency.WithRetryAfter(50 * time.Millisecond)}, true},
		{"waiting", []idempotency.ServerOption{idempotency.WithWaitForInFlight(5 * time.Second)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, setup{server: tt.server})
			results := make([]response, duplicates)
			conflicts := make([]int, duplicates)
			var wg sync.WaitGroup
			for i := range duplicates {
				wg.Go(func() {
					for range 100 {
						r := g.post(t, required, slow, "order-2")
						if r.Status != http.StatusConflict {
							results[i] = r
							return
						}
						conflicts[i]++
						if r.Header.Get("Retry-After") == "" {
							t.Errorf("409 without Retry-After: %s", r.Body)
						}
						time.Sleep(50 * time.Millisecond) // Retry-After is in whole seconds; the server asked for 50ms
					}
					t.Errorf("request %d still in conflict after 100 tries", i)
				})
			}
			wg.Wait()

			executed := 0
			for i, r := range results {
				if r.Status != http.StatusOK || r.Body != results[0].Body {
					t.Fatalf("request %d: %d %s, want 200 %s", i, r.Status, r.Body, results[0].Body)
				}
				if r.Header.Get(gatewayidempotency.ReplayedHeader) != "true" {
					executed++
				}
			}
			total := 0
			for _, n := range conflicts {
				total += n
			}
			switch {
			case executed != 1:
				t.Fatalf("%d answers not marked replayed, want 1", executed)
			case g.srv.Service.Executions() != 1:
				t.Fatalf("handler ran %d times, want 1", g.srv.Service.Executions())
			case !tt.conflicts && total != 0:
				t.Fatalf("%d conflicts while waiting, want 0", total)
			case tt.conflicts && total == 0:
				t.Fatal("no 409 while the first request ran")
			}
			t.Logf("%d conflicts before the replays", total)
		})
	}
}
