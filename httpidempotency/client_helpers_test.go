package httpidempotency_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
)

// arrivals records every request that reaches the server, before the
// middleware: an attempt of the client under test.
type arrivals struct {
	header string // the key header to record; KeyHeader when empty
	mu     sync.Mutex
	seen   []arrival
}

// arrival is one request as it reached the server.
type arrival struct {
	method, path string
	keys         []string // the key header's lines, as sent
	at           time.Time
}

// outer wraps next, recording each request: use it as [setup.outer].
func (a *arrivals) outer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := a.header
		if header == "" {
			header = httpidempotency.KeyHeader
		}
		a.mu.Lock()
		a.seen = append(a.seen, arrival{method: r.Method, path: r.URL.Path, keys: r.Header.Values(header), at: time.Now()})
		a.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (a *arrivals) all() []arrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arrival(nil), a.seen...)
}

// wantKeys checks that n requests reached the server, each with the one
// key header line key.
func (a *arrivals) wantKeys(t *testing.T, n int, key string) {
	t.Helper()
	got := a.all()
	if len(got) != n {
		t.Fatalf("%d attempts reached the server, want %d", len(got), n)
	}
	for i, r := range got {
		if len(r.keys) != 1 || r.keys[0] != key {
			t.Fatalf("attempt %d carried the key lines %q, want [%q]", i+1, r.keys, key)
		}
	}
}

// proxy puts a fault proxy in front of e's server: e.url goes through it
// from now on.
func (e *env) proxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() }) // before the server's Close: cleanups run last first
	e.url = "http://" + p.Addr()
	return p
}

// newClient returns an http.Client whose transport is
// httpidempotency.Transport over an http.Transport of its own, whose idle
// connections close with the test.
func newClient(t *testing.T, opts ...httpidempotency.ClientOption) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: httpidempotency.Transport(base, opts...)}
}

// retries records the calls of a [httpidempotency.RetryHook].
type retries struct {
	mu    sync.Mutex
	calls []retryCall
	then  func(attempt int) // called after recording, when set
}

type retryCall struct {
	attempt int
	status  int // of the response that caused the retry, 0 for none
	err     error
}

func (r *retries) hook(req *http.Request, attempt int, resp *http.Response, err error) {
	c := retryCall{attempt: attempt, err: err}
	if resp != nil {
		c.status = resp.StatusCode
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.then != nil {
		r.then(attempt)
	}
}

func (r *retries) all() []retryCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]retryCall(nil), r.calls...)
}

// do sends req with client and reads the whole answer.
func do(t *testing.T, client *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Trailer: resp.Trailer}
}
