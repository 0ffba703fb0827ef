package httpidempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// TestTransportQuotedContextKey: a key of ContextWithKey that reads as a
// Structured Field string ("k1" in double quotes) reaches the middleware
// as that key, not as k1: sent as a bare token, the server parsed it and
// took it for k1, so a request with the key k1 got the other's answer
// replayed and its handler did not run.
func TestTransportQuotedContextKey(t *testing.T) {
	t.Parallel()
	srv := idempotency.NewServer(testkit.NewMemoryStore(t))
	var runs atomic.Int32
	ts := httptest.NewServer(httpidempotency.Middleware(srv)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(ts.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	client := &http.Client{Transport: httpidempotency.Transport(base)}
	post := func(ctx context.Context, header string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, strings.NewReader(`{"amount":1999}`))
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set(httpidempotency.KeyHeader, header)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	quoted, err := httpidempotency.ContextWithKey(t.Context(), `"k1"`)
	if err != nil {
		t.Fatal(err)
	}
	first := post(quoted, "")
	second := post(t.Context(), "k1")
	if n := runs.Load(); n != 2 || second.Header.Get(httpidempotency.ReplayedHeader) == "true" {
		t.Fatalf("the keys \"k1\" (in quotes, from the context) and k1: %d handler runs, the second replayed %q, want 2 runs; key lines echoed %q and %q",
			n, second.Header.Get(httpidempotency.ReplayedHeader), first.Header.Get(httpidempotency.KeyHeader), second.Header.Get(httpidempotency.KeyHeader))
	}
}
