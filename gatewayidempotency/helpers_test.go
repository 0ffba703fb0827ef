package gatewayidempotency_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
	testinggw "github.com/grpc-idempotency/idempotency/gatewayidempotency/internal/gatewaytest/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// gateway is a real HTTP server (httptest) with a real grpc-gateway mux in
// front of the test service on bufconn ([testkit.Serve]), behind the
// idempotency interceptor over a memory store wrapped in a fault store.
type gateway struct {
	url   string
	http  *http.Client // the test server's, whose connections close with it
	srv   *testserver.Server
	idem  *idempotency.Server // the interceptor's
	store *faultstore.Store
	calls *atomic.Int64 // gRPC calls that reached the server
}

// setup configures a [gateway].
type setup struct {
	handler testserver.HandlerFunc
	server  []idempotency.ServerOption
	gateway []gatewayidempotency.Option
	memory  []memorystore.Option
}

func newGateway(t *testing.T, s setup) *gateway {
	t.Helper()
	fs := faultstore.New(testkit.NewMemoryStore(t, s.memory...))
	calls := new(atomic.Int64)
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		return handler(ctx, req)
	}
	rig := testkit.Serve(t, testkit.Config{Handler: s.handler, Store: fs, Options: s.server, Outer: []grpc.UnaryServerInterceptor{count}})
	srv := rig.Server
	mux := runtime.NewServeMux(gatewayidempotency.ServeMuxOptions(s.gateway...)...)
	if err := testinggw.RegisterTestServiceHandler(t.Context(), mux, srv.Dial(t)); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &gateway{url: hs.URL, http: hs.Client(), srv: srv, idem: rig.Idempotency, store: fs, calls: calls}
}

// response is what an HTTP call returned.
type response = testkit.Response

// post sends body as JSON to path with the given Idempotency-Key header
// lines (none for a call without a key).
func (g *gateway) post(t *testing.T, path, body string, keys ...string) response {
	t.Helper()
	return g.send(t, g.request(t, path, body, keys...))
}

// request is the request post sends, for a test to add headers to.
func (g *gateway) request(t *testing.T, path, body string, keys ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add(gatewayidempotency.KeyHeader, k)
	}
	return req
}

// send sends req and reads the whole answer, trailers included.
func (g *gateway) send(t *testing.T, req *http.Request) response {
	t.Helper()
	return testkit.Send(t, g.http, req)
}

// problem is an RFC 9457 body as the package writes it.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
}

// wantProblem checks that r is a problem of the package's type with the
// given status and reason, and returns it.
func wantProblem(t *testing.T, r response, status int, reason string) problem {
	t.Helper()
	var p problem
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.Body, err)
	}
	if r.Status != status || p.Status != status || p.Reason != reason || p.Type != gatewayidempotency.ProblemType ||
		p.Title != http.StatusText(status) || p.Detail == "" {
		t.Fatalf("got %d %s, want %d with reason %s", r.Status, r.Body, status, reason)
	}
	if ct := r.Header.Get("Content-Type"); ct != gatewayidempotency.ProblemContentType {
		t.Fatalf("Content-Type %q, want %q", ct, gatewayidempotency.ProblemContentType)
	}
	return p
}
