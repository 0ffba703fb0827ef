package httpidempotency

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-idempotency/idempotency"
	httpv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/http/v1"
)

// Middleware returns the middleware that runs each keyed request's handler
// once per key, operation and scope across every process that shares s's
// store, and replays its stored response to every retry.
//
// A request of the middleware's methods ([WithMethods]: POST and PATCH by
// default) that carries a key in the [KeyHeader] header ([WithKeyHeader])
// is claimed under that key with [idempotency.Do]: its handler runs once,
// detached from the client's cancellation; the response goes to the client
// as the handler writes it, and a copy is stored unless its status says a
// retry may get another answer, or that no handler ran ([WithKeptStatuses],
// [DefaultKeep]), in which case the claim is released. The copy holds the
// headers the handler set, not those of the layers in front, and the
// whole body even when the client has left. A retry gets the stored
// status, headers and body byte for byte with [ReplayedHeader]: true,
// beside the headers its own layers in front set. Every answer to a
// request with a valid key, its handler's, a replay or a refusal, echoes
// the request's key header line, as Stripe's API does (stripe-go reads it
// back). Requests of other methods, and keyless requests unless
// [WithKeyRequired], pass through.
//
// Refusals are RFC 9457 problems ([WriteProblem]): 400 for a missing or
// invalid key, 409 with Retry-After while the key is in flight (also to a
// request whose context ended while it waited), 422 for a key reused with
// another request, 503 with Retry-After when the store is unavailable or
// full, 413 for a body longer than [WithMaxRequestBytes] or an
// http.MaxBytesHandler's bound, 423 without Retry-After for a key whose
// claim was abandoned and that its operation's policy blocks
// ([ProblemTypeOutcomeUnknown]), and the status of its gRPC code for a
// scope error ([StatusOf]). Retry-After is the server's
// [idempotency.WithRetryAfter]. The server's options apply: its scope
// ([idempotency.WithScope]) reads the request's context, its retention,
// lease, handler timeout and stored outcome bound hold for these keys as
// for gRPC calls, and so does the policy for abandoned claims: the
// operation's [idempotency.MethodPolicy] ([idempotency.WithOperationPolicy]
// under [WithOperation]'s name), else [idempotency.WithAbandonedClaims];
// an AbandonRecover policy's function is a [Recover]. Place it after routing and authentication: see
// [DefaultKeep].
//
// It has the shape of every net/http middleware, so routers and chains
// (http.ServeMux, chi, alice) take it as it is. It panics when s is nil or
// an option cannot work, naming the option.
func Middleware(s *idempotency.Server, opts ...Option) func(http.Handler) http.Handler {
	if s == nil {
		panic("httpidempotency: Middleware: the server must not be nil")
	}
	c := newConfig(opts)
	if err := errors.Join(c.configErrors...); err != nil {
		panic(err)
	}
	return func(next http.Handler) http.Handler {
		return &handler{s: s, c: c, next: next}
	}
}

type handler struct {
	s    *idempotency.Server
	c    *config
	next http.Handler
}

// errNotKept is what a claimed handler's work returns when its response
// is not kept: Do releases the claim.
var errNotKept = errors.New("httpidempotency: the response is not kept")

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.c.methods[r.Method] {
		h.next.ServeHTTP(w, r)
		return
	}
	key, line, err := h.c.keyOf(r)
	switch {
	case err != nil:
		h.writeProblem(w, r, err)
		return
	case key == "":
		rec := &recorder{w: w} // no copy kept, replay header stripped
		defer rec.finish()
		h.next.ServeHTTP(rec, r)
		return
	}
	// Every answer to a keyed request echoes its key line, as Stripe's
	// do: set before the handler runs, it is a header of the layers in
	// front, which the stored copy does not hold.
	w.Header()[h.c.header] = []string{line}
	req, body, err := h.c.request(r)
	if err != nil {
		writeRequestError(w, err)
		return
	}
	// A recovery ([Recover]) answers this request, should its key be
	// abandoned and its operation's policy AbandonRecover.
	ctx := &recoveryContext{Context: r.Context(), recovery: recovery{r: r, body: body, c: h.c}}
	var rec *recorder
	resp, replayed, err := idempotency.Do(ctx, h.s, h.c.operation, key, req,
		func(ctx context.Context) (*httpv1.Response, error) {
			rec = newRecorder(w, h.c.maxResponse)
			defer rec.finish()
			h.next.ServeHTTP(rec, r.WithContext(ctx))
			out := rec.outcome()
			if !h.c.keep(rec.status) {
				return nil, errNotKept
			}
			return out, nil
		})
	switch {
	case rec != nil:
		// The handler ran here and the client has its answer.
	case err != nil:
		if replayed { // an outcome too large for the server's bound
			w.Header().Set(ReplayedHeader, "true")
		}
		h.writeProblem(w, r, err)
	case replayed:
		replay(w, resp)
	default:
		// A recovery's answer, stored: the first this client gets.
		writeStored(w, resp, false)
	}
}

// writeProblem answers err, the refusal of a request whose handler did
// not run here, with its problem, and a Retry-After the server's
// [idempotency.WithRetryAfter] sets unless err carries its own.
//
// A request whose context ended before its handler started (a deadline
// set by a layer in front passed while it waited for the key in flight,
// or for the store) is answered as the key in flight: its client may
// still be there, and must send the same key again. A client that left
// gets nothing either way.
func (h *handler) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		err = idempotency.ErrKeyInUse
	}
	p := ProblemOf(err)
	if _, ok := retryInfo(err); !ok {
		p.RetryAfter = h.s.RetryAfter()
	}
	p.Write(w)
}

// keyOf returns the key of r, "" when it has none and none is required.
// Its lines are found under any spelling of the header's name: net/http's
// server gives them under the canonical one, but a handler called in
// another way (a serverless adapter, a test) may not.
func (c *config) keyOf(r *http.Request) (key, line string, err error) {
	lines, _ := keyLines(r.Header, c.header)
	switch {
	case len(lines) == 0 && c.required:
		return "", "", &idempotency.KeyError{Err: idempotency.ErrKeyMissing, Detail: "send it in the " + c.header + " header"}
	case len(lines) == 0:
		return "", "", nil
	case len(lines) > 1:
		return "", "", &idempotency.KeyError{Err: idempotency.ErrKeyInvalid, Detail: "more than one " + c.header + " header"}
	}
	key = ParseKey(lines[0])
	if err := idempotency.ValidateKey(key); err != nil {
		return "", "", err
	}
	return key, lines[0], nil
}

// errFingerprint is a WithFingerprint function's failure.
var errFingerprint = errors.New("httpidempotency: computing the request fingerprint failed")

// request reads r's body, up to the bound, and returns what its
// fingerprint covers, and the body; r.Body then reads the same bytes
// again.
func (c *config) request(r *http.Request) (*httpv1.Request, []byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, c.maxRequest+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(body)) > c.maxRequest {
		return nil, nil, ErrRequestTooLarge
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if c.fingerprint == nil {
		return &httpv1.Request{Method: r.Method, Target: r.URL.RequestURI(), Body: body}, body, nil
	}
	custom, err := c.fingerprint(r, body)
	if err != nil {
		return nil, nil, errFingerprint
	}
	r.Body = io.NopCloser(bytes.NewReader(body)) // fn may have read it
	return &httpv1.Request{Custom: custom}, body, nil
}

// writeRequestError answers a request the middleware could not read or
// fingerprint; nothing was claimed.
func writeRequestError(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, ErrRequestTooLarge):
		WriteProblem(w, err)
	case errors.As(err, &tooLarge): // an http.MaxBytesHandler in front
		Problem{Type: ProblemType, Title: http.StatusText(http.StatusRequestEntityTooLarge), Status: http.StatusRequestEntityTooLarge,
			Detail: "the request body is longer than the server accepts"}.Write(w)
	case errors.Is(err, errFingerprint):
		Problem{Type: ProblemType, Title: http.StatusText(http.StatusInternalServerError), Status: http.StatusInternalServerError, Detail: err.Error()}.Write(w)
	default: // reading the body failed: the client went away or sent garbage
		Problem{Type: ProblemType, Title: http.StatusText(http.StatusBadRequest), Status: http.StatusBadRequest, Detail: "reading the request body failed"}.Write(w)
	}
}

// replay writes a stored response: its status, headers and body as the
// client first got them, with [ReplayedHeader]: true. A response that was
// not retained is answered with [idempotency.ErrResponseNotRetained]'s
// problem, also with [ReplayedHeader]: true, as the unary interceptor
// marks its replay and gatewayidempotency any replayed error.
func replay(w http.ResponseWriter, resp *httpv1.Response) {
	writeStored(w, resp, true)
}

// writeStored writes a stored response as [replay] does, with
// [ReplayedHeader]: true when replayed; without it for the answer of a
// recovery ([Recover]), which this client gets first.
func writeStored(w http.ResponseWriter, resp *httpv1.Response, replayed bool) {
	h := w.Header()
	if resp.GetNotRetained() {
		h.Set(ReplayedHeader, "true")
		WriteProblem(w, idempotency.ErrResponseNotRetained)
		return
	}
	for _, f := range resp.GetHeaders() {
		// A record an earlier version stored may hold the marker in
		// another letter case.
		if name := f.GetName(); !strings.EqualFold(name, ReplayedHeader) {
			h[name] = f.GetValues()
		}
	}
	if _, set := h["Content-Length"]; !set && len(resp.GetBody()) > 0 {
		h.Set("Content-Length", strconv.Itoa(len(resp.GetBody())))
	}
	if replayed {
		h.Set(ReplayedHeader, "true")
	}
	w.WriteHeader(int(resp.GetStatus()))
	_, _ = w.Write(resp.GetBody())
}
