package httpidempotency_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A retry gets the stored status, headers and body byte for byte, with
// Idempotent-Replayed: true; the live answer never carries that header,
// even when the handler sets it; the handler runs once.
func TestReplayByteForByte(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(httpidempotency.ReplayedHeader, "true") // a live answer must not say so
		created(w, r)
	}})
	first := e.post(t, "/orders", `{"amount":1999}`, "k1")
	retry := e.post(t, "/orders", `{"amount":1999}`, `"k1"`) // the same key as a Structured Field string
	if first.Status != http.StatusCreated || retry.Status != first.Status || retry.Body != first.Body {
		t.Fatalf("first %d %q, retry %d %q", first.Status, first.Body, retry.Status, retry.Body)
	}
	if got := first.Header.Get(httpidempotency.ReplayedHeader); got != "" {
		t.Errorf("live answer has %s: %q", httpidempotency.ReplayedHeader, got)
	}
	if got := retry.Header.Get(httpidempotency.ReplayedHeader); got != "true" {
		t.Errorf("replay has %s: %q, want true", httpidempotency.ReplayedHeader, got)
	}
	strip := func(h http.Header) http.Header {
		h = maps.Clone(h)
		delete(h, "Date") // each answer's own
		delete(h, httpidempotency.ReplayedHeader)
		delete(h, httpidempotency.KeyHeader) // each request's own line, echoed (TestKeyEchoed)
		return h
	}
	if a, b := strip(first.Header), strip(retry.Header); !equalHeaders(a, b) {
		t.Errorf("headers differ:\nlive   %v\nreplay %v", a, b)
	}
	if got := retry.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=1" || got[1] != "b=2" {
		t.Errorf("Set-Cookie %q, want [a=1 b=2] in order", got)
	}
	e.wantRuns(t, 1)
}

func equalHeaders(a, b http.Header) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return strings.Join(x, "\n") == strings.Join(y, "\n") })
}

// A handler that sets no Content-Type gets the one net/http sniffs, on
// the live answer and on the replay alike.
func TestReplaySniffedContentType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{handler: func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html><body>ok</body></html>"))
	}})
	first := e.post(t, "/page", "", "k")
	retry := e.post(t, "/page", "", "k")
	if ct := first.Header.Get("Content-Type"); ct == "" || retry.Header.Get("Content-Type") != ct || retry.Body != first.Body {
		t.Fatalf("live %q %q, replay %q %q", ct, first.Body, retry.Header.Get("Content-Type"), retry.Body)
	}
	e.wantRuns(t, 1)
}

// Each refusal is a problem with the draft's status, naming its reason,
// with Retry-After where a retry may succeed; the handler does not run.
func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		setup      setup
		call       func(t *testing.T, e *env) response
		status     int
		reason     string
		detail     string
		retryAfter string
		runs       int64
	}{
		{
			name:   "missing key when required",
			setup:  setup{mw: []httpidempotency.Option{httpidempotency.WithKeyRequired()}},
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "{}") },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyMissing.Reason,
			detail: "idempotency key required: send it in the Idempotency-Key header",
		},
		{
			name:   "invalid key",
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "{}", "not a key") },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
			detail: "idempotency key invalid: key has a byte outside printable ASCII at offset 3",
		},
		{
			name:   "non-ASCII in a structured field string",
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "{}", `"héllo"`) },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
			detail: "idempotency key invalid: key has a byte outside printable ASCII at offset 2",
		},
		{
			name:   "not UTF-8",
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "{}", "k\xff") },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
			detail: "idempotency key invalid: key has a byte outside printable ASCII at offset 1",
		},
		{
			name:   "empty structured field string",
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "{}", `""`) },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
			detail: "idempotency key invalid: key is empty",
		},
		{
			name: "too long",
			call: func(t *testing.T, e *env) response {
				return e.post(t, "/orders", "{}", strings.Repeat("k", idempotency.MaxKeyLen+1))
			},
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
			detail: "idempotency key invalid: key is longer than 255 bytes",
		},
		{
			name:   "two keys",
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "{}", "k1", "k2") },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
			detail: "idempotency key invalid: more than one Idempotency-Key header",
		},
		{
			name: "reused with another body",
			call: func(t *testing.T, e *env) response {
				e.post(t, "/orders", `{"amount":1}`, "k")
				return e.post(t, "/orders", `{"amount":2}`, "k")
			},
			status: http.StatusUnprocessableEntity, reason: idempotency.ErrKeyReused.Reason, runs: 1,
		},
		{
			// One operation per middleware: one key on two endpoints is
			// a reused key, as with Stripe.
			name: "reused on another endpoint",
			call: func(t *testing.T, e *env) response {
				e.post(t, "/orders", "{}", "k")
				return e.post(t, "/refunds", "{}", "k")
			},
			status: http.StatusUnprocessableEntity, reason: idempotency.ErrKeyReused.Reason, runs: 1,
		},
		{
			name: "reused with another query",
			call: func(t *testing.T, e *env) response {
				e.post(t, "/orders", "{}", "k")
				return e.post(t, "/orders?dry_run=1", "{}", "k")
			},
			status: http.StatusUnprocessableEntity, reason: idempotency.ErrKeyReused.Reason, runs: 1,
		},
		{
			name: "store unavailable",
			call: func(t *testing.T, e *env) response {
				e.store.Down.Store(true)
				return e.post(t, "/orders", "{}", "k")
			},
			status: http.StatusServiceUnavailable, reason: idempotency.ErrStoreUnavailable.Reason, retryAfter: "1",
		},
		{
			name:  "store full",
			setup: setup{memory: []memorystore.Option{memorystore.WithMaxEntries(1)}},
			call: func(t *testing.T, e *env) response {
				if r := e.post(t, "/orders", "{}", "k1"); r.Status != http.StatusCreated {
					t.Fatalf("first call: %d %s", r.Status, r.Body)
				}
				return e.post(t, "/orders", "{}", "k2")
			},
			status: http.StatusServiceUnavailable, reason: idempotency.ErrStoreFull.Reason, retryAfter: "1", runs: 1,
		},
		{
			// The body is read to fingerprint it: over the bound, nothing
			// is claimed (checked below: no store call).
			name:   "request body over the bound",
			setup:  setup{mw: []httpidempotency.Option{httpidempotency.WithMaxRequestBytes(8)}},
			call:   func(t *testing.T, e *env) response { return e.post(t, "/orders", "123456789", "k") },
			status: http.StatusRequestEntityTooLarge, reason: httpidempotency.ErrRequestTooLarge.Reason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.setup)
			r := tt.call(t, e)
			p := wantProblem(t, r, tt.status, tt.reason)
			if tt.detail != "" && p.Detail != tt.detail {
				t.Errorf("detail %q, want %q", p.Detail, tt.detail)
			}
			if got := r.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			e.wantRuns(t, tt.runs)
			if tt.runs == 0 && !e.store.Down.Load() {
				if n := len(e.store.Calls()); n != 0 {
					t.Errorf("%d store calls (%v), want none", n, e.store.Calls())
				}
			}
		})
	}
}

// A request over the body bound claims nothing: the same key with a body
// within it runs.
func TestRequestTooLargeClaimsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{mw: []httpidempotency.Option{httpidempotency.WithMaxRequestBytes(8)}})
	wantProblem(t, e.post(t, "/orders", "123456789", "k"), http.StatusRequestEntityTooLarge, httpidempotency.ErrRequestTooLarge.Reason)
	if r := e.post(t, "/orders", "12345678", "k"); r.Status != http.StatusCreated {
		t.Fatalf("within the bound: %d %s", r.Status, r.Body)
	}
	e.wantRuns(t, 1)
}

// Responses a retry may not get again (5xx, 408, 425, 429), those a
// router or an authentication layer gives before any handler runs (401,
// 403, 404, 405) and those that send the request elsewhere (307, 308)
// release the claim: a retry runs the handler again. Every
// other status is kept and replayed.
func TestKeptStatuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		kept   bool
	}{
		{http.StatusOK, true}, {http.StatusCreated, true}, {http.StatusNoContent, true},
		{http.StatusFound, true}, {http.StatusSeeOther, true},
		{http.StatusTemporaryRedirect, false}, {http.StatusPermanentRedirect, false}, {http.StatusBadRequest, true}, {http.StatusConflict, true},
		{http.StatusGone, true}, {http.StatusRequestEntityTooLarge, true}, {http.StatusUnprocessableEntity, true},
		{http.StatusUnauthorized, false}, {http.StatusForbidden, false}, {http.StatusNotFound, false},
		{http.StatusMethodNotAllowed, false},
		{http.StatusRequestTimeout, false}, {http.StatusTooEarly, false}, {http.StatusTooManyRequests, false},
		{http.StatusInternalServerError, false}, {http.StatusBadGateway, false}, {http.StatusServiceUnavailable, false},
	} {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, setup{handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
			}})
			first := e.post(t, "/orders", "{}", "k")
			retry := e.post(t, "/orders", "{}", "k")
			if first.Status != tt.status || retry.Status != tt.status {
				t.Fatalf("statuses %d, %d; want %d", first.Status, retry.Status, tt.status)
			}
			replayed := retry.Header.Get(httpidempotency.ReplayedHeader) == "true"
			if replayed != tt.kept {
				t.Errorf("retry replayed: %v, want %v", replayed, tt.kept)
			}
			want := int64(2)
			if tt.kept {
				want = 1
			}
			e.wantRuns(t, want)
		})
	}
}

// WithKeptStatuses replaces the default: here 503 is kept too.
func TestWithKeptStatuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{
		handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		mw:      []httpidempotency.Option{httpidempotency.WithKeptStatuses(func(int) bool { return true })},
	})
	e.post(t, "/orders", "{}", "k")
	if r := e.post(t, "/orders", "{}", "k"); r.Status != http.StatusServiceUnavailable || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry: %d, replayed %q", r.Status, r.Header.Get(httpidempotency.ReplayedHeader))
	}
	e.wantRuns(t, 1)
}

// Requests of methods outside the set pass through untouched, key or not;
// keyless requests of the set run every time.
func TestPassThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mw     []httpidempotency.Option
		method string
		keys   []string
		runs   int64
	}{
		{"GET with a key", nil, http.MethodGet, []string{"k"}, 2},
		{"PUT with a key", nil, http.MethodPut, []string{"k"}, 2},
		{"DELETE with an invalid key", nil, http.MethodDelete, []string{"not a key"}, 2},
		{"POST without a key", nil, http.MethodPost, nil, 2},
		{"PATCH with a key", nil, http.MethodPatch, []string{"k"}, 1},
		{"PUT with a key, PUT in the set", []httpidempotency.Option{httpidempotency.WithMethods(http.MethodPut)}, http.MethodPut, []string{"k"}, 1},
		{"POST with a key, POST not in the set", []httpidempotency.Option{httpidempotency.WithMethods(http.MethodPut)}, http.MethodPost, []string{"k"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, setup{mw: tt.mw})
			for range 2 {
				if r := e.send(t, e.request(t, tt.method, "/orders", "{}", tt.keys...)); r.Status != http.StatusCreated {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
			}
			e.wantRuns(t, tt.runs)
		})
	}
}

type tenantKey struct{}

// Keys are separated by the server's scope, read from the request's
// context: one key sent by two tenants runs once for each, and each gets
// its own answer back.
func TestScopeSeparation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{
		server: []idempotency.ServerOption{idempotency.WithScope(func(ctx context.Context) (string, error) {
			tenant, _ := ctx.Value(tenantKey{}).(string)
			return tenant, nil
		})},
		outer: func(next http.Handler) http.Handler { // an authentication layer
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, r.Header.Get("X-Tenant"))))
			})
		},
	})
	post := func(tenant, body string) response {
		req := e.request(t, http.MethodPost, "/orders", body, "k")
		req.Header.Set("X-Tenant", tenant)
		return e.send(t, req)
	}
	a, b := post("a", `"a"`), post("b", `"b"`)
	if a.Status != http.StatusCreated || b.Status != http.StatusCreated || a.Body == b.Body {
		t.Fatalf("a: %d %s, b: %d %s", a.Status, a.Body, b.Status, b.Body)
	}
	if again := post("a", `"a"`); again.Body != a.Body || again.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("a again: %s, want a replay of %s", again.Body, a.Body)
	}
	e.wantRuns(t, 2)
}

// WithFingerprint decides what a reused key is: here the body alone, so
// the same key and body on another path is a replay.
func TestWithFingerprint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{mw: []httpidempotency.Option{httpidempotency.WithFingerprint(
		func(_ *http.Request, body []byte) ([]byte, error) { return body, nil })}})
	first := e.post(t, "/orders", `"x"`, "k")
	retry := e.post(t, "/orders/v2", `"x"`, "k")
	if retry.Body != first.Body || retry.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry %s, want a replay of %s", retry.Body, first.Body)
	}
	wantProblem(t, e.post(t, "/orders", `"y"`, "k"), http.StatusUnprocessableEntity, idempotency.ErrKeyReused.Reason)
	e.wantRuns(t, 1)
}

// A handler called with a header map that net/http's server did not build
// (a serverless adapter's, a test's) may hold the key under another
// spelling of the name: the middleware finds it there, and counts the
// lines of every spelling.
func TestMiddlewareKeyAnySpelling(t *testing.T) {
	t.Parallel()
	var runs int
	h := httpidempotency.Middleware(idempotency.NewServer(testkit.NewMemoryStore(t)))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
	}))
	serve := func(header http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/orders", strings.NewReader("{}"))
		r.Header = header
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := serve(http.Header{"idempotency-key": {"k1"}})
	again := serve(http.Header{"IDEMPOTENCY-KEY": {"k1"}})
	if first.Code != http.StatusCreated || again.Code != http.StatusCreated || again.Header().Get(httpidempotency.ReplayedHeader) != "true" || runs != 1 {
		t.Fatalf("answers %d and %d (replayed %q) after %d runs, want 201 twice, the second replayed, one run",
			first.Code, again.Code, again.Header().Get(httpidempotency.ReplayedHeader), runs)
	}
	if two := serve(http.Header{"idempotency-key": {"k2"}, httpidempotency.KeyHeader: {"k2"}}); two.Code != http.StatusBadRequest || runs != 1 {
		t.Fatalf("two spellings: %d after %d runs, want 400 and no run", two.Code, runs)
	}
}

// Every answer to a request with a valid key echoes its key header line,
// as Stripe's API does and stripe-go reads back: the handler's answer, a
// replay (the retry's own line, not the stored one), and a refusal of the
// key; with WithKeyHeader, under that header. A key refused as invalid,
// and a missing one, are not echoed.
func TestKeyEchoed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{mw: []httpidempotency.Option{httpidempotency.WithKeyRequired()}})
	wantEcho := func(t *testing.T, what string, r response, line string) {
		t.Helper()
		if got := r.Header.Values(httpidempotency.KeyHeader); line == "" && len(got) != 0 || line != "" && (len(got) != 1 || got[0] != line) {
			t.Fatalf("%s (%d): %s %q, want %q", what, r.Status, httpidempotency.KeyHeader, got, line)
		}
	}
	live := e.post(t, "/orders", `{"amount":1}`, "k1")
	wantEcho(t, "executed", live, "k1")
	replay := e.post(t, "/orders", `{"amount":1}`, `"k1"`)
	if replay.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("the retry got %d, not a replay", replay.Status)
	}
	wantEcho(t, "replayed", replay, `"k1"`)
	reused := e.post(t, "/orders", `{"amount":2}`, "k1")
	wantProblem(t, reused, http.StatusUnprocessableEntity, idempotency.ErrKeyReused.Reason)
	wantEcho(t, "refused as reused", reused, "k1")
	wantEcho(t, "refused as invalid", e.post(t, "/orders", `{"amount":1}`, "a key"), "")
	wantEcho(t, "refused as missing", e.post(t, "/orders", `{"amount":1}`), "")

	hooks := newEnv(t, setup{mw: []httpidempotency.Option{httpidempotency.WithKeyHeader("webhook-id")}})
	req := hooks.request(t, http.MethodPost, "/webhooks", `{}`)
	req.Header.Set("webhook-id", "msg_1")
	if r := hooks.send(t, req); r.Header.Get("Webhook-Id") != "msg_1" || r.Header.Get(httpidempotency.KeyHeader) != "" {
		t.Fatalf("WithKeyHeader: headers %v, want Webhook-Id: msg_1 alone", r.Header)
	}
}
