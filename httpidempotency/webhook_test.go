package httpidempotency_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// A webhook sender whose client gives up while the receiver runs (its
// connection is cut) resends the delivery with the same webhook-id. The
// handler, detached from the cut connection, finishes and its answer is
// stored; the resend, waiting for the one in flight, gets it replayed.
func TestWebhookSenderGivesUp(t *testing.T) {
	t.Parallel()
	started, proceed := make(chan struct{}), make(chan struct{})
	e := newEnv(t, setup{
		handler: func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-proceed // until the sender has given up
			if err := r.Context().Err(); err != nil {
				t.Errorf("the handler's context ended with the connection: %v", err)
			}
			created(w, r)
		},
		server: []idempotency.ServerOption{idempotency.WithWaitForInFlight(time.Minute)},
		mw:     []httpidempotency.Option{httpidempotency.WithKeyHeader("webhook-id"), httpidempotency.WithKeyRequired()},
	})
	deliver := func(ctx context.Context) (*http.Response, error) {
		req := e.request(t, http.MethodPost, "/webhooks", `{"type":"invoice.paid"}`)
		req.Header.Set("webhook-id", "msg_1")
		return e.http.Do(req.WithContext(ctx))
	}

	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		resp, err := deliver(ctx)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-started
	cancel() // the sender's client gives up: the connection is cut
	if err := <-first; err == nil {
		t.Fatal("the first delivery got an answer")
	}
	close(proceed)

	resp, err := deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("resend: %d, replayed %q; want the first delivery's 201, replayed", resp.StatusCode, resp.Header.Get(httpidempotency.ReplayedHeader))
	}
	e.wantRuns(t, 1)
}
