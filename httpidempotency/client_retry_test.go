package httpidempotency_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// answer is a scripted server's first answer.
type answer struct {
	status int
	header map[string]string
	body   string
}

// problem is the body of this library's problem with reason.
func problem(status int, reason string) string {
	b, _ := json.Marshal(httpidempotency.Problem{Type: httpidempotency.ProblemType, Title: http.StatusText(status), Status: status, Detail: "d", Reason: reason})
	return string(b)
}

var problemHeader = map[string]string{"Content-Type": httpidempotency.ProblemContentType}

func withHeader(h map[string]string, name, value string) map[string]string {
	out := map[string]string{name: value}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// scripted starts a server that answers first to the first request and
// 201 to every other one, and returns its URL and how many requests it
// got.
func scripted(t *testing.T, first answer) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1) > 1 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		for k, v := range first.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(first.status)
		_, _ = io.WriteString(w, first.body)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, &n
}

// bodies wraps a RoundTripper and records, for each response it returns,
// whether its body was read to the end and closed.
type bodies struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	eof, closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *trackedBody) Close() error { b.closed.Store(true); return b.ReadCloser.Close() }

func (b *bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil {
		tb := &trackedBody{ReadCloser: resp.Body}
		resp.Body = tb
		b.mu.Lock()
		b.seen = append(b.seen, tb)
		b.mu.Unlock()
	}
	return resp, err
}

func (b *bodies) CloseIdleConnections() { b.next.(*http.Transport).CloseIdleConnections() }

// What is retried: a 503, this library's in-use 409, and nothing else,
// nor a replayed answer; a Retry-After over the cap, malformed, or in an
// HTTP date over the cap by the server's clock ends the retries. The body
// of a retried answer is read and closed; the last answer comes back with
// its body whole.
func TestTransportRetries(t *testing.T) {
	t.Parallel()
	inUse := problem(http.StatusConflict, idempotency.ErrKeyInUse.Reason)
	date := "Sat, 01 Jan 2000 00:00:00 GMT"
	tests := []struct {
		name  string
		first answer
		retry bool
	}{
		{"503", answer{status: 503}, true},
		{"503 with Retry-After 0", answer{status: 503, header: map[string]string{"Retry-After": "0"}}, true},
		{"503 with Retry-After a date that has passed", answer{status: 503, header: map[string]string{"Retry-After": date, "Date": date}}, true},
		{"503 with Retry-After a date an hour after the server's clock", answer{status: 503, header: map[string]string{"Retry-After": "Sat, 01 Jan 2000 01:00:00 GMT", "Date": date}}, false},
		{"503 with Retry-After over the cap", answer{status: 503, header: map[string]string{"Retry-After": "61"}}, false},
		{"503 with Retry-After past any duration", answer{status: 503, header: map[string]string{"Retry-After": "99999999999999999999"}}, false},
		{"503 with a malformed Retry-After", answer{status: 503, header: map[string]string{"Retry-After": "soon"}}, false},
		{"503 with a fractional Retry-After", answer{status: 503, header: map[string]string{"Retry-After": "0.5"}}, false},
		{"503 replayed", answer{status: 503, header: map[string]string{httpidempotency.ReplayedHeader: "true"}}, false},
		{"409 in use", answer{status: 409, header: problemHeader, body: inUse}, true},
		{"409 in use with Retry-After 0", answer{status: 409, header: withHeader(problemHeader, "Retry-After", "0"), body: inUse}, true},
		{"409 in use, media type parameters", answer{status: 409, header: map[string]string{"Content-Type": "application/problem+json; charset=utf-8"}, body: inUse}, true},
		{"409 in use replayed", answer{status: 409, header: withHeader(problemHeader, httpidempotency.ReplayedHeader, "true"), body: inUse}, false},
		{"409 plain", answer{status: 409, body: "order exists"}, false},
		{"409 plain with Retry-After", answer{status: 409, header: map[string]string{"Retry-After": "0"}, body: "order exists"}, false},
		{"409 problem of another reason", answer{status: 409, header: problemHeader, body: problem(409, "OTHER")}, false},
		{"409 in use as JSON, not a problem", answer{status: 409, header: map[string]string{"Content-Type": "application/json"}, body: inUse}, false},
		{"409 problem of another type", answer{status: 409, header: problemHeader, body: strings.Replace(inUse, httpidempotency.ProblemType, "about:blank", 1)}, false},
		{"409 in use past the bound read", answer{status: 409, header: problemHeader, body: strings.Replace(inUse, `"d"`, `"`+strings.Repeat("d", 20<<10)+`"`, 1)}, false},
		{"429 with Retry-After", answer{status: 429, header: map[string]string{"Retry-After": "0"}}, false},
		{"400", answer{status: 400, header: problemHeader, body: problem(400, idempotency.ErrKeyInvalid.Reason)}, false},
		{"422", answer{status: 422, header: problemHeader, body: problem(422, idempotency.ErrKeyReused.Reason)}, false},
		{"500", answer{status: 500}, false},
		{"502", answer{status: 502}, false},
		{"504", answer{status: 504}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, n := scripted(t, tt.first)
			base := &bodies{next: &http.Transport{}}
			t.Cleanup(base.CloseIdleConnections)
			client := &http.Client{Transport: httpidempotency.Transport(base, httpidempotency.WithBackoff(nil))}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			r := do(t, client, req)
			if tt.retry {
				if n.Load() != 2 || r.Status != http.StatusCreated {
					t.Fatalf("%d attempts, last answer %d; want the retry's 201", n.Load(), r.Status)
				}
				if b := base.seen[0]; !b.eof.Load() || !b.closed.Load() {
					t.Fatalf("the retried answer's body: read to its end %v, closed %v; want both", b.eof.Load(), b.closed.Load())
				}
				return
			}
			if n.Load() != 1 || r.Status != tt.first.status || r.Body != tt.first.body {
				t.Fatalf("%d attempts, answer %d %q; want 1, and the first answer with its body whole", n.Load(), r.Status, r.Body)
			}
		})
	}
}

// WithMaxAttempts counts the first attempt: the last attempt's answer
// comes back as it came, its body unread; WithMaxAttempts(1) and
// WithoutRetry never retry.
func TestTransportMaxAttempts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		opt      httpidempotency.ClientOption
		attempts int64
	}{
		{"default", nil, 5}, // the documented default
		{"WithMaxAttempts(3)", httpidempotency.WithMaxAttempts(3), 3},
		{"WithMaxAttempts(1)", httpidempotency.WithMaxAttempts(1), 1},
		{"WithMaxAttempts(0)", httpidempotency.WithMaxAttempts(0), 1},
		{"WithoutRetry", httpidempotency.WithoutRetry(), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "down")
			}))
			t.Cleanup(hs.Close)
			opts := []httpidempotency.ClientOption{httpidempotency.WithBackoff(nil)}
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			client := newClient(t, opts...)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hs.URL, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if r := do(t, client, req); r.Status != http.StatusServiceUnavailable || r.Body != "down" || n.Load() != tt.attempts {
				t.Fatalf("%d attempts, answer %d %q; want %d, the last 503 whole", n.Load(), r.Status, r.Body, tt.attempts)
			}
		})
	}
}

// A server that does not answer is retried with the same key and the
// rewound body; a certificate error, which a retry cannot fix, is not.
func TestTransportConnectionErrors(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		hs := httptest.NewServer(http.NotFoundHandler())
		url := hs.URL
		hs.Close() // nothing listens there now
		var hook retries
		client := newClient(t, httpidempotency.WithBackoff(nil), httpidempotency.WithMaxAttempts(3), httpidempotency.WithOnRetry(hook.hook))
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("got an answer from a closed server")
		}
		if calls := hook.all(); len(calls) != 2 || calls[0].err == nil || calls[1].attempt != 3 {
			t.Fatalf("retry hook calls %+v, want two, caused by the refused connection", calls)
		}
	})
	t.Run("certificate", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int64
		hs := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
		t.Cleanup(hs.Close)
		var hook retries
		client := newClient(t, httpidempotency.WithBackoff(nil), httpidempotency.WithOnRetry(hook.hook)) // does not trust hs
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hs.URL, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("got an answer from an untrusted server")
		}
		if calls := hook.all(); len(calls) != 0 {
			t.Fatalf("retry hook calls %+v, want none", calls)
		}
	})
}
