package httpidempotency

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
)

// RecoverFunc finds out what the abandoned attempt of a keyed request did,
// for a middleware whose operation's policy is [idempotency.AbandonRecover]
// (decision 300). It gets the request as it came (method, target, headers
// and body; its context's [idempotency.ClaimFromContext] says Attempt 2 or
// more, and when the abandoned attempt started) and answers on w as the
// handler would have, or returns an error:
//
//   - nil: what it wrote is the request's answer, stored and replayed to
//     every retry as the handler's would be. It must be a status the
//     middleware keeps ([WithKeptStatuses]) and a response it can keep
//     (no Flush, hijack or trailers); any other leaves the key blocked.
//   - [idempotency.ErrRerun]: the abandoned attempt did nothing that a
//     new run would repeat; the handler runs now, under the same claim,
//     and what was written is dropped.
//   - [idempotency.ErrOutcomeUnknown]: the key stays abandoned, and the
//     request is answered 423 ([ProblemTypeOutcomeUnknown]).
//   - a gRPC status error of a code the server stores
//     ([idempotency.WithStoredCodes]): stored as the outcome, as any
//     operation's RecoverFunc's is, and answered with its problem
//     ([ProblemOf]), now and to every retry. Write the answer instead to
//     choose its status and body.
//   - any other error: the key stays abandoned and the request is answered
//     with the error's problem ([ProblemOf]: a gRPC status's HTTP status,
//     else 500), so that a later retry recovers again.
type RecoverFunc func(w http.ResponseWriter, r *http.Request) error

// Recover returns fn as the [idempotency.RecoverFunc] of a middleware's
// operation, given to the server with its policy:
//
//	srv := idempotency.NewServer(st, idempotency.WithOperationPolicy("orders", idempotency.MethodPolicy{
//		Abandoned: idempotency.AbandonRecover,
//		Recover:   httpidempotency.Recover(findOrder),
//	}))
//	h := httpidempotency.Middleware(srv, httpidempotency.WithOperation("orders"))(orders)
//
// Its answer is recorded as the handler's is, in the same record, so a
// retry replays it byte for byte. It recovers only requests of
// [Middleware]: run for a [idempotency.Do] or [idempotency.Once] call of
// the operation, it leaves the key abandoned with an error wrapping
// [idempotency.ErrMisconfigured]. A nil fn panics.
func Recover(fn RecoverFunc) idempotency.RecoverFunc {
	if fn == nil {
		panic("httpidempotency: Recover: the function must not be nil")
	}
	return func(ctx context.Context, _ proto.Message) (proto.Message, error) {
		rc, ok := ctx.Value(recoveryKey{}).(*recovery)
		if !ok {
			return nil, fmt.Errorf("%w: httpidempotency.Recover recovers requests of httpidempotency.Middleware only, and this call of its operation is not one", idempotency.ErrMisconfigured)
		}
		r := rc.r.WithContext(ctx)
		r.Body = io.NopCloser(bytes.NewReader(rc.body))
		rec := newRecorder(&sink{header: http.Header{}}, rc.c.maxResponse)
		err := fn(rec, r)
		rec.finish()
		if err != nil {
			return nil, err
		}
		out := rec.outcome()
		switch {
		case out.GetNotRetained():
			return nil, fmt.Errorf("%w: the recovery's answer cannot be kept (a body longer than WithMaxResponseBytes, a Flush, a hijack or trailers)", idempotency.ErrOutcomeUnknown)
		case !rc.c.keep(int(out.GetStatus())):
			return nil, fmt.Errorf("%w: the recovery answered %d, a status the middleware does not keep", idempotency.ErrOutcomeUnknown, out.GetStatus())
		}
		return out, nil
	}
}

// recoveryKey is the context key of a keyed request's [recovery].
type recoveryKey struct{}

// recoveryContext is a keyed request's context with its [recovery] under
// [recoveryKey]: one allocation per request, where context.WithValue and
// the recovery would be two. Its Done, Err and Deadline are the request
// context's, so the context package finds its cancellation as it finds
// the request context's.
type recoveryContext struct {
	context.Context
	recovery recovery
}

// Value returns the recovery for [recoveryKey], else the request
// context's value.
func (c *recoveryContext) Value(key any) any {
	if _, ok := key.(recoveryKey); ok {
		return &c.recovery
	}
	return c.Context.Value(key)
}

// recovery is what [Recover] needs of a keyed request of the middleware:
// the request, the body the middleware read, and the middleware's
// settings.
type recovery struct {
	r    *http.Request
	body []byte
	c    *config
}

// sink is the ResponseWriter a recovery writes to: its answer is recorded
// and stored, and the middleware sends it once it is.
type sink struct{ header http.Header }

func (s *sink) Header() http.Header       { return s.header }
func (*sink) Write(p []byte) (int, error) { return len(p), nil }
func (*sink) WriteHeader(int)             {}
