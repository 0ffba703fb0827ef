package httpidempotency_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A webhook receiver deduplicates deliveries by the Standard Webhooks
// webhook-id header. The sender retries until it gets an answer; here the
// answer to its first delivery is lost after the receiver ran, so it sends
// the same message again, and the receiver replays its answer instead of
// acting twice.
func ExampleMiddleware_webhook() {
	mem := memorystore.New()
	defer mem.Close()
	srv := idempotency.NewServer(mem)

	var processed atomic.Int64
	receive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// webhook-signature was verified before the middleware (docs/http.md).
		event, _ := io.ReadAll(r.Body)
		processed.Add(1)
		fmt.Fprintf(w, "processed %s", event)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks", httpidempotency.Middleware(srv,
		httpidempotency.WithKeyHeader("webhook-id"),
		httpidempotency.WithOperation("webhooks"),
		httpidempotency.WithKeyRequired(),
	)(receive))
	receiver := httptest.NewServer(mux)
	defer receiver.Close()

	// The sender: its first answer is lost on the way back.
	sender := &http.Client{Transport: &loseFirstAnswer{next: receiver.Client().Transport}}
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, receiver.URL+"/webhooks", strings.NewReader(`{"type":"invoice.paid"}`))
		req.Header.Set("webhook-id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W")
		req.Header.Set("webhook-timestamp", "1674087231")
		resp, err := sender.Do(req)
		if err != nil {
			fmt.Printf("delivery %d: no answer\n", attempt)
			continue // a real sender backs off first
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("delivery %d: %d %q, replayed: %q\n", attempt, resp.StatusCode, body, resp.Header.Get(httpidempotency.ReplayedHeader))
		break
	}
	fmt.Println("events processed:", processed.Load())
	// Output:
	// delivery 1: no answer
	// delivery 2: 200 "processed {\"type\":\"invoice.paid\"}", replayed: "true"
	// events processed: 1
}

// loseFirstAnswer delivers every request, and drops the first answer as a
// connection cut after the receiver ran would.
type loseFirstAnswer struct {
	next http.RoundTripper
	lost atomic.Bool
}

func (l *loseFirstAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || l.lost.Swap(true) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset by peer")
}
