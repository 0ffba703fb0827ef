package gatewayidempotency

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// ProblemType is the RFC 9457 problem type of every error of the
// idempotency interceptor but one ([ProblemTypeOutcomeUnknown]), the one
// plain HTTP answers carry too ([httpidempotency.ProblemType]). Its "reason" member is the
// google.rpc.ErrorInfo reason that the gRPC status carries
// ([idempotency.ErrKeyInUse] and the others); "detail" is the status
// message (for a missing key, one that names the [KeyHeader] header
// instead of the server's metadata key); "title" and "status" are those of
// the HTTP status.
const ProblemType = httpidempotency.ProblemType

// ProblemTypeOutcomeUnknown is the problem type of a key whose claim was
// abandoned and that the method's policy blocks
// ([idempotency.ErrOutcomeUnknown], answered 423 Locked without
// Retry-After), as plain HTTP answers it
// ([httpidempotency.ProblemTypeOutcomeUnknown]).
const ProblemTypeOutcomeUnknown = httpidempotency.ProblemTypeOutcomeUnknown

// ProblemContentType is the media type of a [ProblemType] body.
const ProblemContentType = httpidempotency.ProblemContentType

// handleError is the mux's error handler: the interceptor's errors become
// problems with the statuses of [httpidempotency.StatusOf], the mapping
// plain HTTP answers share; every other error goes to c.next. A replayed
// error gets the replay header either way.
func (c *config) handleError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if replayed(ctx) {
		w.Header().Set(ReplayedHeader, "true")
	}
	st, ok := status.FromError(err)
	if !ok || idempotency.Reason(err) == "" {
		c.next(ctx, mux, m, w, r, err)
		return
	}
	p := httpidempotency.ProblemOf(err)
	if p.Reason == idempotency.ErrKeyMissing.Reason {
		// The server names its metadata key; an HTTP client sends a header.
		p.Detail = idempotency.ErrKeyMissing.Error() + ": send it in the " + KeyHeader + " header"
	}
	if !hasRetryInfo(st) {
		p.RetryAfter = c.retryAfter
	}
	p.SetHeaders(w.Header())
	// The default handler still writes the server's metadata as headers and
	// trailers, as the mux is configured to; only the status and the body
	// are ours.
	runtime.DefaultHTTPErrorHandler(ctx, mux, problemMarshaler{Marshaler: m, problem: p}, w, r,
		&runtime.HTTPStatusError{HTTPStatus: p.Status, Err: err})
}

// hasRetryInfo reports whether st carries a google.rpc.RetryInfo, which
// sets the Retry-After of its answer; [WithRetryAfter] sets the others'.
func hasRetryInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// problemMarshaler writes the status that grpc-gateway's error handler
// marshals as a problem; anything else goes to the mux's marshaler.
type problemMarshaler struct {
	runtime.Marshaler
	problem httpidempotency.Problem
}

// ContentType implements runtime.Marshaler.
func (p problemMarshaler) ContentType(v any) string {
	if _, ok := v.(*spb.Status); ok {
		return ProblemContentType
	}
	return p.Marshaler.ContentType(v)
}

// Marshal implements runtime.Marshaler.
func (p problemMarshaler) Marshal(v any) ([]byte, error) {
	if _, ok := v.(*spb.Status); !ok {
		return p.Marshaler.Marshal(v)
	}
	return json.Marshal(p.problem)
}
