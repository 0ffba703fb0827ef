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

// TestWebhookBlocked (decision 299): a delivery whose webhook-id's claim
// was abandoned (the receiver died mid-handler), under AbandonBlock, is
// answered 423 with the outcome-unknown problem on every resend: a
// non-2xx that the sender retries on its own bounded schedule and then
// records as failed, never an ack of work that may not have been done.
// The handler does not run.
func TestWebhookBlocked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{
		server: []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)},
		mw:     []httpidempotency.Option{httpidempotency.WithKeyHeader("webhook-id"), httpidempotency.WithKeyRequired()},
	})
	e.abandon(t, httpidempotency.DefaultOperation, "/webhooks", `{"type":"invoice.paid"}`, "msg_1")
	for range 3 { // the sender's resends
		req := e.request(t, http.MethodPost, "/webhooks", `{"type":"invoice.paid"}`)
		req.Header.Set("webhook-id", "msg_1")
		r := e.send(t, req)
		if r.Status != http.StatusLocked || r.Header.Get("Retry-After") != "" || r.Header.Get("Webhook-Id") != "msg_1" {
			t.Fatalf("resend: %d %v %s; want 423 without Retry-After, echoing the id", r.Status, r.Header, r.Body)
		}
	}
	e.wantRuns(t, 0)
}
