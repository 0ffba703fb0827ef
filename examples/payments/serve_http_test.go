package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// The -http mode: the README's curl commands against the REST gateway in
// front of the gRPC server. A charge, its replay, the key reused with
// another amount, a missing key, and a duplicate while the charge runs.
func TestServeHTTP(t *testing.T) {
	t.Parallel()
	addr := startServe(t, config{Logs: t.Output(), Latency: 300 * time.Millisecond})
	charges := "http://" + addr + "/v1/charges"
	const body = `{"customer":"dave","amount_cents":700}`

	first := httpPost(t, charges, "order-7", body)
	replay := httpPost(t, charges, "order-7", body)
	if first.Status != http.StatusOK || replay.Status != http.StatusOK || replay.Body != first.Body ||
		!strings.Contains(first.Body, `"id":"ch_1"`) {
		t.Fatalf("charge %d %s, replay %d %s; want ch_1 twice", first.Status, first.Body, replay.Status, replay.Body)
	}
	if first.Header.Get("Idempotent-Replayed") != "" || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("want Idempotent-Replayed: true on the replay only")
	}

	wantHTTPProblem(t, httpPost(t, charges, "order-7", `{"customer":"dave","amount_cents":900}`), 422, idempotency.ErrKeyReused.Reason)
	wantHTTPProblem(t, httpPost(t, charges, "", body), 400, idempotency.ErrKeyMissing.Reason)

	running := make(chan response, 1)
	go func() { running <- httpPost(t, charges, "order-8", `{"customer":"erin","amount_cents":800}`) }()
	time.Sleep(100 * time.Millisecond) // the charge takes 300ms
	dup := httpPost(t, charges, "order-8", `{"customer":"erin","amount_cents":800}`)
	wantHTTPProblem(t, dup, 409, idempotency.ErrKeyInUse.Reason)
	if dup.Header.Get("Retry-After") == "" {
		t.Fatal("409 without Retry-After")
	}
	if r := <-running; r.Status != http.StatusOK {
		t.Fatalf("the running charge: %d %s", r.Status, r.Body)
	}

	if r := httpGet(t, charges+"/ch_1"); r.Status != http.StatusOK || !strings.Contains(r.Body, `"customer":"dave"`) {
		t.Fatalf("GET ch_1: %d %s", r.Status, r.Body)
	}
}

// startServe runs [serve] with only -http (the gRPC server on a loopback
// port) until the test ends, and returns the gateway's address.
func startServe(t *testing.T, cfg config) string {
	t.Helper()
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, listeners{grpc: grpcLis, http: httpLis}, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return httpLis.Addr().String()
}

type response = testkit.Response

func httpPost(t *testing.T, url, key, body string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return testkit.Send(t, nil, req)
}

func httpGet(t *testing.T, url string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Send(t, nil, req)
}

func wantHTTPProblem(t *testing.T, r response, status int, reason string) {
	t.Helper()
	var p struct {
		Status int    `json:"status"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil || r.Status != status || p.Status != status || p.Reason != reason ||
		r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("got %d %s (%s), want a %d problem with reason %s", r.Status, r.Body, r.Header.Get("Content-Type"), status, reason)
	}
}
