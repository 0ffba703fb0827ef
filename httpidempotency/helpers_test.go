package httpidempotency_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// env is a real HTTP server (httptest) whose handler runs behind the
// middleware, over a memory store wrapped in a fault store.
type env struct {
	url   string
	http  *http.Client // the test server's, whose connections close with it
	store *faultstore.Store
	srv   *idempotency.Server // behind the middleware
	runs  *atomic.Int64       // times the handler ran
}

// setup configures an [env].
type setup struct {
	handler http.HandlerFunc // default: 201 with a JSON body naming the run
	server  []idempotency.ServerOption
	mw      []httpidempotency.Option
	memory  []memorystore.Option
	// outer wraps the middleware, as an authentication layer would.
	outer func(http.Handler) http.Handler
}

func newEnv(t *testing.T, s setup) *env {
	t.Helper()
	mem := testkit.NewMemoryStore(t, s.memory...)
	fs := faultstore.New(mem)
	runs := new(atomic.Int64)
	handler := s.handler
	if handler == nil {
		handler = created
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		handler(w, r)
	})
	srv := idempotency.NewServer(fs, s.server...)
	h = httpidempotency.Middleware(srv, s.mw...)(h)
	if s.outer != nil {
		h = s.outer(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &env{url: hs.URL, http: hs.Client(), store: fs, srv: srv, runs: runs}
}

// created answers 201 with headers of several kinds and a body that
// echoes the request body, so that two runs can be told apart by it.
func created(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/1")
	w.Header().Add("Set-Cookie", "a=1")
	w.Header().Add("Set-Cookie", "b=2")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"order":` + string(body) + `}`))
}

// response is what an HTTP call returned.
type response = testkit.Response

// post sends body to path with the given key header lines (none for a
// request without a key).
func (e *env) post(t *testing.T, path, body string, keys ...string) response {
	t.Helper()
	return e.send(t, e.request(t, http.MethodPost, path, body, keys...))
}

// request is a request with the given Idempotency-Key header lines.
func (e *env) request(t *testing.T, method, path, body string, keys ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		req.Header.Add(httpidempotency.KeyHeader, k)
	}
	return req
}

// send sends req and reads the whole answer.
func (e *env) send(t *testing.T, req *http.Request) response {
	t.Helper()
	return testkit.Send(t, e.http, req)
}

// wantProblem checks that r is a problem of the package's type with the
// given status and reason, marked as a replay only when it is one (not
// retained), and returns it.
func wantProblem(t *testing.T, r response, status int, reason string) httpidempotency.Problem {
	t.Helper()
	var p httpidempotency.Problem
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.Body, err)
	}
	if r.Status != status || p.Status != status || p.Reason != reason || p.Type != httpidempotency.ProblemType ||
		p.Title != http.StatusText(status) || p.Detail == "" {
		t.Fatalf("got %d %s, want %d with reason %s", r.Status, r.Body, status, reason)
	}
	if ct := r.Header.Get("Content-Type"); ct != httpidempotency.ProblemContentType {
		t.Fatalf("Content-Type %q, want %q", ct, httpidempotency.ProblemContentType)
	}
	// Only the not-retained answer comes from the store: it is a replay.
	want := ""
	if reason == idempotency.ErrResponseNotRetained.Reason {
		want = "true"
	}
	if got := r.Header.Get(httpidempotency.ReplayedHeader); got != want {
		t.Fatalf("%s: %q on a %s problem, want %q", httpidempotency.ReplayedHeader, got, reason, want)
	}
	return p
}

// wantRuns checks how many times the handler ran.
func (e *env) wantRuns(t *testing.T, n int64) {
	t.Helper()
	if got := e.runs.Load(); got != n {
		t.Fatalf("the handler ran %d times, want %d", got, n)
	}
}
