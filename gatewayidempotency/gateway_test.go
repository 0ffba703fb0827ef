package gatewayidempotency_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

const (
	required = "/v1/required"
	charge   = `{"payload":"charge","amount":"1999"}`
)

// Each error of the interceptor gets the IETF draft's status, a problem
// body naming its reason, and Retry-After where a retry may succeed.
func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	tests := []errorCase{
		{
			name:   "missing key",
			call:   func(t *testing.T, g *gateway) response { return g.post(t, required, charge) },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyMissing.Reason,
			detail: "idempotency key required: send it in the Idempotency-Key header",
		},
		{
			name:   "invalid key",
			call:   func(t *testing.T, g *gateway) response { return g.post(t, required, charge, "not a key") },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason, local: true,
			detail: "idempotency key invalid: key has a byte outside printable ASCII at offset 3",
		},
		// Keys that gRPC metadata cannot carry (grpc-go refuses them on the
		// client side) are refused as invalid as well, by the gateway.
		invalidKey("non-ASCII key", "héllo", "key has a byte outside printable ASCII at offset 1"),
		invalidKey("non-ASCII in a structured field string", `"héllo"`, "key has a byte outside printable ASCII at offset 2"),
		invalidKey("not UTF-8", "k\xff", "key has a byte outside printable ASCII at offset 1"),
		// HTAB is the one control byte net/http lets through in a header
		// value (its client and server refuse the others).
		invalidKey("control character", "a\tb", "key has a byte outside printable ASCII at offset 1"),
		invalidKey("control character in a structured field string", "\"a\tb\"", "key has a byte outside printable ASCII at offset 2"),
		invalidKey("empty key", "", "key is empty"),
		invalidKey("empty structured field string", `""`, "key is empty"),
		invalidKey("too long", strings.Repeat("k", idempotency.MaxKeyLen+1), "key is longer than 255 bytes"),
		invalidKey("one line of two", "k1", "key has a byte outside printable ASCII at offset 1", "hé"),
		{
			name:   "two keys",
			call:   func(t *testing.T, g *gateway) response { return g.post(t, required, charge, "k1", "k2") },
			status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason,
		},
		{
			name:   "in use",
			setup:  setup{server: []idempotency.ServerOption{idempotency.WithRetryAfter(1500 * time.Millisecond)}},
			call:   inUse,
			status: http.StatusConflict, reason: idempotency.ErrKeyInUse.Reason, retryAfter: "2",
		},
		{
			name: "reused with another body",
			call: func(t *testing.T, g *gateway) response {
				if r := g.post(t, required, charge, "k"); r.Status != http.StatusOK {
					t.Fatalf("first call: %d %s", r.Status, r.Body)
				}
				return g.post(t, required, `{"payload":"charge","amount":"2500"}`, "k")
			},
			status: http.StatusUnprocessableEntity, reason: idempotency.ErrKeyReused.Reason,
		},
		{
			name: "store unavailable",
			call: func(t *testing.T, g *gateway) response {
				g.store.Down.Store(true)
				return g.post(t, required, charge, "k")
			},
			status: http.StatusServiceUnavailable, reason: idempotency.ErrStoreUnavailable.Reason, retryAfter: "1",
		},
		{
			name: "store full",
			// The server's RetryInfo (WithRetryAfter on the server) wins over
			// the gateway's own default.
			setup: setup{memory: []memorystore.Option{memorystore.WithMaxEntries(1)},
				server:  []idempotency.ServerOption{idempotency.WithRetryAfter(2500 * time.Millisecond)},
				gateway: []gatewayidempotency.Option{gatewayidempotency.WithRetryAfter(7 * time.Second)}},
			call: func(t *testing.T, g *gateway) response {
				if r := g.post(t, required, charge, "k1"); r.Status != http.StatusOK {
					t.Fatalf("first call: %d %s", r.Status, r.Body)
				}
				return g.post(t, required, charge, "k2")
			},
			status: http.StatusServiceUnavailable, reason: idempotency.ErrStoreFull.Reason, retryAfter: "3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, tt.setup)
			r := tt.call(t, g)
			p := wantProblem(t, r, tt.status, tt.reason)
			if tt.detail != "" && p.Detail != tt.detail {
				t.Errorf("detail %q, want %q", p.Detail, tt.detail)
			}
			if got := r.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if got := r.Header.Get(gatewayidempotency.ReplayedHeader); got != "" {
				t.Errorf("%s: %q on a refusal, want none", gatewayidempotency.ReplayedHeader, got)
			}
			if n := g.calls.Load(); tt.local && n != 0 {
				t.Errorf("%d gRPC calls reached the server, want none", n)
			}
		})
	}
}

// errorCase is a case of TestErrorStatuses.
type errorCase struct {
	name       string
	setup      setup
	call       func(t *testing.T, g *gateway) response
	status     int
	reason     string
	retryAfter string // "" when none is expected
	detail     string // "" for the gRPC status message
	// local: the gateway answered itself; no gRPC call reached the server.
	local bool
}

// invalidKey is an [errorCase]: a call with the given Idempotency-Key
// header lines, which the gateway refuses as invalid with detail.
func invalidKey(name, line, detail string, more ...string) errorCase {
	keys := append([]string{line}, more...)
	return errorCase{
		name:   name,
		call:   func(t *testing.T, g *gateway) response { return g.post(t, required, charge, keys...) },
		status: http.StatusBadRequest, reason: idempotency.ErrKeyInvalid.Reason, local: true,
		detail: "idempotency key invalid: " + detail,
	}
}

// inUse holds a slow call with key "k" in its handler and sends the same
// call again.
func inUse(t *testing.T, g *gateway) response {
	t.Helper()
	const slow = `{"payload":"slow","sleep":"0.3s"}`
	first := make(chan response, 1)
	go func() { first <- g.post(t, required, slow, "k") }()
	g.srv.Service.WaitExecutions(t, 1)
	r := g.post(t, required, slow, "k")
	if f := <-first; f.Status != http.StatusOK {
		t.Errorf("the first call: %d %s", f.Status, f.Body)
	}
	return r
}

// Errors that are not the interceptor's keep grpc-gateway's mapping and
// body, or go to the handler given to WithErrorHandler.
func TestOtherErrorsKeepTheirMapping(t *testing.T) {
	t.Parallel()
	notFound := func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return nil, status.Error(codes.NotFound, "no such charge")
	}
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		g := newGateway(t, setup{handler: notFound})
		r := g.post(t, required, charge, "k")
		var body struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusNotFound || body.Code != int(codes.NotFound) || body.Message != "no such charge" ||
			r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("got %d %s (%s), want grpc-gateway's 404", r.Status, r.Body, r.Header.Get("Content-Type"))
		}
	})
	t.Run("WithErrorHandler", func(t *testing.T) {
		t.Parallel()
		next := func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(status.Convert(err).Message()))
		}
		g := newGateway(t, setup{handler: notFound, gateway: []gatewayidempotency.Option{gatewayidempotency.WithErrorHandler(next)}})
		if r := g.post(t, required, charge, "k"); r.Status != http.StatusTeapot || r.Body != "no such charge" {
			t.Fatalf("got %d %q, want the next handler's 418", r.Status, r.Body)
		}
		// The interceptor's own errors are still ours.
		wantProblem(t, g.post(t, required, charge), http.StatusBadRequest, idempotency.ErrKeyMissing.Reason)
	})
}

// A retry gets the first answer's JSON byte for byte, marked replayed; the
// handler ran once.
func TestReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys [2]string // the header of the first call and of the retry
	}{
		{"bare key", [2]string{"order-1", "order-1"}},
		{"structured field string", [2]string{`"order-1"`, `"order-1"`}},
		{"quoted, then bare", [2]string{`"order-1"`, "order-1"}},
		{"escapes", [2]string{`"a\"b\\c"`, `a"b\c`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, setup{})
			first := g.post(t, required, charge, tt.keys[0])
			retry := g.post(t, required, charge, tt.keys[1])
			if first.Status != http.StatusOK || retry.Status != http.StatusOK || retry.Body != first.Body {
				t.Fatalf("first %d %s, retry %d %s; want the same 200 answer", first.Status, first.Body, retry.Status, retry.Body)
			}
			if first.Header.Get(gatewayidempotency.ReplayedHeader) != "" || retry.Header.Get(gatewayidempotency.ReplayedHeader) != "true" {
				t.Fatalf("%s: first %q, retry %q; want none, then true", gatewayidempotency.ReplayedHeader,
					first.Header.Get(gatewayidempotency.ReplayedHeader), retry.Header.Get(gatewayidempotency.ReplayedHeader))
			}
			if n := g.srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// A stored error of the handler is replayed with grpc-gateway's mapping and
// the replay header.
func TestReplayedError(t *testing.T) {
	t.Parallel()
	g := newGateway(t, setup{handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return nil, status.Error(codes.InvalidArgument, "amount over the limit")
	}})
	first := g.post(t, required, charge, "k")
	retry := g.post(t, required, charge, "k")
	if first.Status != http.StatusBadRequest || retry.Status != http.StatusBadRequest || retry.Body != first.Body {
		t.Fatalf("first %d %s, retry %d %s; want the same 400", first.Status, first.Body, retry.Status, retry.Body)
	}
	if first.Header.Get(gatewayidempotency.ReplayedHeader) != "" || retry.Header.Get(gatewayidempotency.ReplayedHeader) != "true" {
		t.Fatal("want the replay header on the retry only")
	}
	if n := g.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// The header reaches a server that reads its key from another metadata key.
func TestWithMetadataKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		gateway []gatewayidempotency.Option
		status  int
	}{
		{"matching", []gatewayidempotency.Option{gatewayidempotency.WithMetadataKey("X-Request-Key")}, http.StatusOK},
		{"default name", nil, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, setup{server: []idempotency.ServerOption{idempotency.WithMetadataKey("x-request-key")}, gateway: tt.gateway})
			if r := g.post(t, required, charge, "k"); r.Status != tt.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Body, tt.status)
			}
		})
	}
}

// A metadata key gRPC cannot carry the key under makes ServeMuxOptions
// panic, naming the option, as the server's WithMetadataKey does.
func TestWithMetadataKeyInvalidPanics(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "Idempotency Key!", "idempotency-key-bin", "grpc-idempotency-key"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				err, _ := recover().(error)
				if err == nil || !strings.HasPrefix(err.Error(), "gatewayidempotency: WithMetadataKey: metadata key") {
					t.Fatalf("panic %v, want one naming WithMetadataKey", err)
				}
			}()
			gatewayidempotency.ServeMuxOptions(gatewayidempotency.WithMetadataKey(name))
		})
	}
}

// A replayed answer says so in the draft's header alone: the server's
// replay metadata is not forwarded beside it, as a Grpc-Metadata- header
// or a Grpc-Trailer- trailer, while the handler's own header and trailer
// metadata still are, through grpc-gateway's mapping or the matchers given
// to WithOutgoingHeaderMatcher and WithOutgoingTrailerMatcher.
func TestReplayMarkedOnce(t *testing.T) {
	t.Parallel()
	own := func(prefix string) runtime.HeaderMatcherFunc {
		return func(key string) (string, bool) { return prefix + key, true }
	}
	tests := []struct {
		name                  string
		gateway               []gatewayidempotency.Option
		fail                  bool   // whether the handler fails
		userHeader, userTrail string // where the handler's metadata should arrive
	}{
		{name: "success", userHeader: "Grpc-Metadata-X-User", userTrail: "Grpc-Trailer-X-Trace"},
		{name: "error", fail: true, userHeader: "Grpc-Metadata-X-User", userTrail: "Grpc-Trailer-X-Trace"},
		{
			name: "success, own matchers",
			gateway: []gatewayidempotency.Option{gatewayidempotency.WithOutgoingHeaderMatcher(own("My-")),
				gatewayidempotency.WithOutgoingTrailerMatcher(own("My-Trailer-"))},
			userHeader: "My-X-User", userTrail: "My-Trailer-X-Trace",
		},
		{
			name: "error, own matchers", fail: true,
			gateway: []gatewayidempotency.Option{gatewayidempotency.WithOutgoingHeaderMatcher(own("My-")),
				gatewayidempotency.WithOutgoingTrailerMatcher(own("My-Trailer-"))},
			userHeader: "My-X-User", userTrail: "My-Trailer-X-Trace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			handler := func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if err := grpc.SetHeader(ctx, metadata.Pairs("x-user", "u")); err != nil {
					return nil, err
				}
				if err := grpc.SetTrailer(ctx, metadata.Pairs("x-trace", "t")); err != nil {
					return nil, err
				}
				if tt.fail {
					return nil, status.Error(codes.InvalidArgument, "amount over the limit")
				}
				return &testingv1.DoResponse{Payload: "done"}, nil
			}
			g := newGateway(t, setup{handler: handler, gateway: tt.gateway})
			var answers [2]response
			for i := range answers {
				req := g.request(t, required, charge, "k")
				req.Header.Set("TE", "trailers") // so that trailer metadata is forwarded too
				answers[i] = g.send(t, req)
			}
			for i, r := range answers {
				want := map[bool]string{false: "", true: "true"}[i == 1]
				if got := r.Header.Get(gatewayidempotency.ReplayedHeader); got != want {
					t.Errorf("answer %d: %s %q, want %q", i+1, gatewayidempotency.ReplayedHeader, got, want)
				}
				for where, h := range map[string]http.Header{"header": r.Header, "trailer": r.Trailer} {
					for name := range h {
						if name != gatewayidempotency.ReplayedHeader && strings.Contains(strings.ToLower(name), idempotency.ReplayedKey) {
							t.Errorf("answer %d: %s %s: %q beside %s", i+1, where, name, h[name], gatewayidempotency.ReplayedHeader)
						}
					}
				}
				if got := r.Header.Get(tt.userHeader); got != "u" {
					t.Errorf("answer %d: header %s %q, want the handler's %q (header %v)", i+1, tt.userHeader, got, "u", r.Header)
				}
				if got := r.Trailer.Get(tt.userTrail); got != "t" {
					t.Errorf("answer %d: trailer %s %q, want the handler's %q (trailer %v)", i+1, tt.userTrail, got, "t", r.Trailer)
				}
			}
			if n := g.srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// Through the gateway, the replay marker is the HTTP header
// Idempotent-Replayed, as httpidempotency and a Connect-protocol service
// send it; every answer to a request with a valid key echoes its key line
// (the handler's, a replay, a refusal); and a missing key is asked for in
// a header.
func TestMarkerAndKeyEcho(t *testing.T) {
	t.Parallel()
	g := newGateway(t, setup{})
	first := g.post(t, required, charge, "order-1")
	retry := g.post(t, required, charge, `"order-1"`)
	if got := retry.Header["Idempotent-Replayed"]; len(got) != 1 || got[0] != "true" {
		t.Fatalf("replay headers %v, want Idempotent-Replayed: true", retry.Header)
	}
	reused := g.post(t, required, `{"payload":"another"}`, "order-1")
	wantProblem(t, reused, http.StatusUnprocessableEntity, idempotency.ErrKeyReused.Reason)
	for _, c := range []struct {
		what string
		r    response
		line string
	}{{"executed", first, "order-1"}, {"replayed", retry, `"order-1"`}, {"refused as reused", reused, "order-1"}} {
		if got := c.r.Header.Values(gatewayidempotency.KeyHeader); len(got) != 1 || got[0] != c.line {
			t.Errorf("%s (%d): %s %q, want %q", c.what, c.r.Status, gatewayidempotency.KeyHeader, got, c.line)
		}
	}
	missing := g.post(t, required, charge)
	if p := wantProblem(t, missing, http.StatusBadRequest, idempotency.ErrKeyMissing.Reason); !strings.HasSuffix(p.Detail, "header") || len(missing.Header.Values(gatewayidempotency.KeyHeader)) != 0 {
		t.Fatalf("missing key: %q, echo %q; want a detail naming the header, no echo", p.Detail, missing.Header.Values(gatewayidempotency.KeyHeader))
	}
}
