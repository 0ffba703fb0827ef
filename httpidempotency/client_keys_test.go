package httpidempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// Each logical request has one key, sent on every attempt: the caller's
// header as the caller wrote it, else the context's key, else a minted
// one. The caller's request is left as it was.
func TestTransportKeyOnEveryAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string // the caller's key header line, if any
		ctxKey string // the key put in the context, if any
		want   string // the line every attempt carries; "" for a minted UUID
	}{
		{name: "header", header: "order-1042", want: "order-1042"},
		{name: "structured field header", header: `"order-1042"`, want: `"order-1042"`},
		{name: "context", ctxKey: "order-1042", want: "order-1042"},
		{name: "header and the same key in the context", header: "order-1042", ctxKey: "order-1042", want: "order-1042"},
		{name: "minted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seen arrivals
			e := newEnv(t, setup{outer: seen.outer})
			proxy := e.proxy(t)
			client := newClient(t)
			req := e.request(t, http.MethodPost, "/orders", `{"amount":1999}`)
			if tt.header != "" {
				req.Header.Set(httpidempotency.KeyHeader, tt.header)
			}
			if tt.ctxKey != "" {
				ctx, err := httpidempotency.ContextWithKey(req.Context(), tt.ctxKey)
				if err != nil {
					t.Fatal(err)
				}
				req = req.WithContext(ctx)
			}
			before := req.Header.Clone()
			proxy.CutNextReply(1)
			if r := do(t, client, req); r.Status != http.StatusCreated || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
				t.Fatalf("got %d %s; want the stored 201, replayed", r.Status, r.Body)
			}
			want := tt.want
			if want == "" {
				got := seen.all()
				if len(got) == 0 || len(got[0].keys) != 1 || uuid.Validate(got[0].keys[0]) != nil {
					t.Fatalf("first attempt %+v, want a minted UUID", got)
				}
				want = got[0].keys[0]
			}
			seen.wantKeys(t, 2, want)
			if fmt.Sprint(req.Header) != fmt.Sprint(before) {
				t.Fatalf("the caller's request headers changed from %v to %v", before, req.Header)
			}
			e.wantRuns(t, 1)
		})
	}
}

// A key that cannot be sent, or keys that disagree, fail the request
// before any attempt with a *idempotency.KeyError, as the gRPC client
// refuses them (decision 20).
func TestTransportKeyRefused(t *testing.T) {
	t.Parallel()
	other, err := httpidempotency.ContextWithKey(context.Background(), "order-9")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    []httpidempotency.ClientOption
		headers []string
		ctx     context.Context
	}{
		{name: "invalid header key", headers: []string{"order 1042"}},
		{name: "two header lines", headers: []string{"order-1042", "order-1042"}},
		{name: "header and context disagree", headers: []string{"order-1042"}, ctx: other},
		{name: "generator returns an invalid key", opts: []httpidempotency.ClientOption{httpidempotency.WithKeyGenerator(func() string { return "" })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seen arrivals
			e := newEnv(t, setup{outer: seen.outer})
			client := newClient(t, tt.opts...)
			req := e.request(t, http.MethodPost, "/orders", `{"amount":1999}`, tt.headers...)
			if tt.ctx != nil {
				req = req.WithContext(tt.ctx)
			}
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got %d, want a key error", resp.StatusCode)
			}
			var ke *idempotency.KeyError
			if !errors.As(err, &ke) || ke.Err != idempotency.ErrKeyInvalid {
				t.Fatalf("error %v, want a *idempotency.KeyError with reason %s", err, idempotency.ErrKeyInvalid.Reason)
			}
			if len(seen.all()) != 0 {
				t.Fatalf("%d attempts reached the server, want none", len(seen.all()))
			}
		})
	}
}

// ContextWithKey checks the key as the middleware would, and refuses a
// context that carries another key.
func TestContextWithKey(t *testing.T) {
	t.Parallel()
	ctx, err := httpidempotency.ContextWithKey(t.Context(), "order-1042")
	if err != nil {
		t.Fatal(err)
	}
	if same, err := httpidempotency.ContextWithKey(ctx, "order-1042"); err != nil || same != ctx {
		t.Fatalf("the same key again: %v, %v; want ctx unchanged", same, err)
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		key  string
	}{
		{"invalid key", t.Context(), "order 1042"},
		{"empty key", t.Context(), ""},
		{"another key", ctx, "order-9"},
	} {
		got, err := httpidempotency.ContextWithKey(c.ctx, c.key)
		var ke *idempotency.KeyError
		if !errors.As(err, &ke) || ke.Err != idempotency.ErrKeyInvalid || got != c.ctx {
			t.Errorf("%s: %v, %v; want ctx unchanged and a key error", c.name, got, err)
		}
	}
}

// Requests of other methods go to the base transport untouched: no key,
// no retries. WithMethods, shared with the middleware, sets the methods.
func TestTransportMethods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     []httpidempotency.ClientOption
		method   string
		keyed    bool
		attempts int
	}{
		{name: "GET", method: http.MethodGet, attempts: 1},
		{name: "PUT", method: http.MethodPut, attempts: 1},
		{name: "POST", method: http.MethodPost, keyed: true, attempts: 2},
		{name: "PATCH", method: http.MethodPatch, keyed: true, attempts: 2},
		{name: "PUT in WithMethods", opts: []httpidempotency.ClientOption{httpidempotency.WithMethods(http.MethodPut)}, method: http.MethodPut, keyed: true, attempts: 2},
		{name: "POST not in WithMethods", opts: []httpidempotency.ClientOption{httpidempotency.WithMethods(http.MethodPut)}, method: http.MethodPost, attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seen arrivals
			var n int
			var mu sync.Mutex
			e := newEnv(t, setup{outer: seen.outer, handler: func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if n++; n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable) // not kept: a retry runs again
					return
				}
				w.WriteHeader(http.StatusOK)
			}})
			client := newClient(t, append(tt.opts, httpidempotency.WithBackoff(nil))...)
			do(t, client, e.request(t, tt.method, "/orders", ""))
			got := seen.all()
			if len(got) != tt.attempts {
				t.Fatalf("%d attempts, want %d", len(got), tt.attempts)
			}
			for _, a := range got {
				if keyed := len(a.keys) == 1; keyed != tt.keyed {
					t.Fatalf("attempt with key lines %q, want keyed %v", a.keys, tt.keyed)
				}
			}
		})
	}
}

// WithKeyHeader, shared with the middleware, sends the key under another
// header: a webhook sender's webhook-id, here read by a receiver built
// with the same option.
func TestTransportKeyHeader(t *testing.T) {
	t.Parallel()
	seen := arrivals{header: "webhook-id"}
	e := newEnv(t, setup{outer: seen.outer, mw: []httpidempotency.Option{httpidempotency.WithKeyHeader("webhook-id"), httpidempotency.WithKeyRequired()}})
	proxy := e.proxy(t)
	client := newClient(t, httpidempotency.WithKeyHeader("webhook-id"))
	req := e.request(t, http.MethodPost, "/webhooks", `{"type":"invoice.paid"}`)
	req.Header.Set("webhook-id", "msg_1")
	proxy.CutNextReply(1)
	if r := do(t, client, req); r.Status != http.StatusCreated || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("got %d %s; want the stored 201, replayed", r.Status, r.Body)
	}
	seen.wantKeys(t, 2, "msg_1")
	e.wantRuns(t, 1)
}

// http.Client follows a 307 or 308 with a new request, which does not
// carry the headers a RoundTripper set: the transport sends it with the
// key the redirected request carried, one key for one logical request. A
// 303 turns the request into a GET, which gets no key.
func TestTransportRedirectKeepsTheKey(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusSeeOther} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			t.Parallel()
			var seen arrivals
			e := newEnv(t, setup{outer: func(next http.Handler) http.Handler {
				return seen.outer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/old" {
						http.Redirect(w, r, "/orders", code)
						return
					}
					next.ServeHTTP(w, r)
				}))
			}})
			client := newClient(t)
			do(t, client, e.request(t, http.MethodPost, "/old", `{"amount":1999}`))
			got := seen.all()
			if len(got) != 2 || got[1].path != "/orders" || len(got[0].keys) != 1 {
				t.Fatalf("requests %+v, want /old with a key, then /orders", got)
			}
			if code == http.StatusSeeOther {
				if got[1].method != http.MethodGet || len(got[1].keys) != 0 {
					t.Fatalf("after a 303: %+v, want a GET without a key", got[1])
				}
				return
			}
			seen.wantKeys(t, 2, got[0].keys[0])
			e.wantRuns(t, 1)
		})
	}
}

// Many goroutines share one transport while the proxy cuts replies: each
// logical request gets its own answer, and each handler ran once.
func TestTransportConcurrent(t *testing.T) {
	t.Parallel()
	const requests = 32
	e := newEnv(t, setup{})
	proxy := e.proxy(t)
	client := newClient(t, httpidempotency.WithBackoff(nil))
	proxy.CutNextReply(4) // fewer than the attempts of one request
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for i := range requests {
		wg.Go(func() {
			body := fmt.Sprintf(`{"amount":%d}`, i)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/orders", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				errs <- err
				return
			}
			if resp.StatusCode != http.StatusCreated || string(b) != `{"order":`+body+`}` {
				errs <- fmt.Errorf("request %d: got %d %s", i, resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.wantRuns(t, requests)
}

// An option that cannot work makes Transport panic with a message that
// names it.
func TestTransportConfigPanics(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opt  httpidempotency.ClientOption
	}{
		{"WithKeyHeader", httpidempotency.WithKeyHeader("Idempotency Key")},
		{"WithMethods", httpidempotency.WithMethods()},
		{"WithMethods", httpidempotency.WithMethods("PO ST")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, "httpidempotency: "+tt.name+": ") {
					t.Fatalf("panic %q, want one naming %s", msg, tt.name)
				}
			}()
			httpidempotency.Transport(nil, tt.opt)
		})
	}
}

// A caller may set its key under any spelling of the header's name
// (r.Header["idempotency-key"]: Go keeps it as written, and net/http
// sends it so): the transport finds it, adds no key of its own beside it,
// and sends it under one spelling, the canonical one. Two spellings that
// carry two lines are two lines, refused before any attempt.
func TestTransportKeyAnySpelling(t *testing.T) {
	t.Parallel()
	other, err := httpidempotency.ContextWithKey(context.Background(), "order-9")
	if err != nil {
		t.Fatal(err)
	}
	same, err := httpidempotency.ContextWithKey(context.Background(), "order-1042")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		header  string   // WithKeyHeader's name on both sides; KeyHeader when empty
		set     []string // the spellings the caller sets, each with a line of its own
		ctx     context.Context
		refused bool
	}{
		{name: "lower case", set: []string{"idempotency-key"}},
		{name: "upper case", set: []string{"IDEMPOTENCY-KEY"}},
		{name: "lower case and the same key in the context", set: []string{"idempotency-key"}, ctx: same},
		{name: "WithKeyHeader lower case", header: "webhook-id", set: []string{"webhook-id"}},
		{name: "two spellings", set: []string{"idempotency-key", httpidempotency.KeyHeader}, refused: true},
		{name: "lower case and another key in the context", set: []string{"idempotency-key"}, ctx: other, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seen := arrivals{header: tt.header}
			var mw []httpidempotency.Option
			var copts []httpidempotency.ClientOption
			if tt.header != "" {
				mw = append(mw, httpidempotency.WithKeyHeader(tt.header))
				copts = append(copts, httpidempotency.WithKeyHeader(tt.header))
			}
			e := newEnv(t, setup{outer: seen.outer, mw: append(mw, httpidempotency.WithKeyRequired())})
			proxy := e.proxy(t)
			var sent sentNames
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			client := &http.Client{Transport: httpidempotency.Transport(sent.wrap(base, tt.header), copts...)}
			req := e.request(t, http.MethodPost, "/orders", `{"amount":1999}`)
			for _, name := range tt.set {
				req.Header[name] = append(req.Header[name], "order-1042")
			}
			if tt.ctx != nil {
				req = req.WithContext(tt.ctx)
			}
			before := req.Header.Clone()
			if tt.refused {
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %d, want a key error", resp.StatusCode)
				}
				var ke *idempotency.KeyError
				if !errors.As(err, &ke) || ke.Err != idempotency.ErrKeyInvalid || len(seen.all()) != 0 {
					t.Fatalf("error %v after %d attempts, want a *idempotency.KeyError with reason %s before any", err, len(seen.all()), idempotency.ErrKeyInvalid.Reason)
				}
				return
			}
			proxy.CutNextReply(1)
			if r := do(t, client, req); r.Status != http.StatusCreated || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
				t.Fatalf("got %d %s; want the stored 201, replayed", r.Status, r.Body)
			}
			seen.wantKeys(t, 2, "order-1042")
			e.wantRuns(t, 1)
			want := httpidempotency.KeyHeader
			if tt.header != "" {
				want = http.CanonicalHeaderKey(tt.header)
			}
			for i, names := range sent.all() {
				if len(names) != 1 || names[0] != want {
					t.Fatalf("attempt %d sent the key under %q, want only %q", i+1, names, want)
				}
			}
			if fmt.Sprint(req.Header) != fmt.Sprint(before) {
				t.Fatalf("the caller's request headers changed from %v to %v", before, req.Header)
			}
		})
	}
}

// sentNames records, for each request a RoundTripper sends, the spellings
// of the key header's name it carries.
type sentNames struct {
	mu    sync.Mutex
	names [][]string
}

func (s *sentNames) wrap(base http.RoundTripper, header string) http.RoundTripper {
	if header == "" {
		header = httpidempotency.KeyHeader
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		var names []string
		for name := range r.Header {
			if strings.EqualFold(name, header) {
				names = append(names, name)
			}
		}
		s.mu.Lock()
		s.names = append(s.names, names)
		s.mu.Unlock()
		return base.RoundTrip(r)
	})
}

func (s *sentNames) all() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.names...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
