package httpidempotency_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

// A response that cannot be replayed whole reaches the live client in
// full, and its key completes as not retained: a retry gets the
// not-retained problem, never a truncated copy, and the handler does not
// run again.
func TestNotRetained(t *testing.T) {
	t.Parallel()
	const part1, part2 = "first part;", "second part"
	tests := []struct {
		name    string
		mw      []httpidempotency.Option
		handler http.HandlerFunc
	}{
		{
			name: "body over the bound",
			mw:   []httpidempotency.Option{httpidempotency.WithMaxResponseBytes(len(part1+part2) - 1)},
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(part1))
				_, _ = w.Write([]byte(part2))
			},
		},
		{
			name: "http.Flusher",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(part1))
				w.(http.Flusher).Flush()
				_, _ = w.Write([]byte(part2))
			},
		},
		{
			name: "http.ResponseController",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(part1))
				if err := http.NewResponseController(w).Flush(); err != nil {
					panic(err)
				}
				_, _ = w.Write([]byte(part2))
			},
		},
		{
			name: "trailers",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Trailer", "X-Checksum")
				_, _ = w.Write([]byte(part1 + part2))
				w.Header().Set("X-Checksum", "abc")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, setup{handler: tt.handler, mw: tt.mw})
			if live := e.post(t, "/export", "", "k"); live.Status != http.StatusOK || live.Body != part1+part2 {
				t.Fatalf("live answer %d %q, want 200 %q", live.Status, live.Body, part1+part2)
			}
			p := wantProblem(t, e.post(t, "/export", "", "k"), http.StatusBadRequest, idempotency.ErrResponseNotRetained.Reason)
			if strings.Contains(p.Detail, part1) {
				t.Fatalf("the problem carries part of the body: %q", p.Detail)
			}
			e.wantRuns(t, 1)
		})
	}
}

// A body exactly at the bound is kept.
func TestResponseAtTheBound(t *testing.T) {
	t.Parallel()
	const body = "0123456789"
	e := newEnv(t, setup{
		handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) },
		mw:      []httpidempotency.Option{httpidempotency.WithMaxResponseBytes(len(body))},
	})
	e.post(t, "/export", "", "k")
	if r := e.post(t, "/export", "", "k"); r.Body != body || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry %d %q, want a replay of %q", r.Status, r.Body, body)
	}
	e.wantRuns(t, 1)
}

// A hijacked connection's answer is the handler's own: not retained.
func TestHijackNotRetained(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{handler: func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		_ = buf.Flush()
	}})
	req := e.request(t, http.MethodPost, "/raw", "", "k")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := bufio.NewReader(resp.Body).ReadString(0)
	resp.Body.Close()
	if b != "hi" {
		t.Fatalf("live answer %q, want hi", b)
	}
	// The client has its answer before the handler returns and its key is
	// completed; a retry until then is in flight (409).
	wait.For(t, func() bool { return e.store.Count("complete") == 1 })
	wantProblem(t, e.post(t, "/raw", "", "k"), http.StatusBadRequest, idempotency.ErrResponseNotRetained.Reason)
	e.wantRuns(t, 1)
}
