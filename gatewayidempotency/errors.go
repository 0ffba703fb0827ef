package gatewayidempotency

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// ProblemType is the RFC 9457 problem type of every error of the
// idempotency interceptor. Its "reason" member is the google.rpc.ErrorInfo
// reason that the gRPC status carries ([idempotency.ReasonKeyInUse] and the
// others); "detail" is the status message (for a missing key, one that names
// the [KeyHeader] header instead of the server's metadata key); "title" and
// "status" are those of the HTTP status.
const ProblemType = "https://pkg.go.dev/github.com/grpc-idempotency/idempotency/gatewayidempotency#ProblemType"

// ProblemContentType is the media type of a [ProblemType] body.
const ProblemContentType = "application/problem+json"

// statusOfReason maps the reasons that the IETF draft gives a status to.
// Other reasons of ours take grpc-gateway's status for their gRPC code.
var statusOfReason = map[string]int{
	idempotency.ReasonKeyMissing:       http.StatusBadRequest,
	idempotency.ReasonKeyInvalid:       http.StatusBadRequest,
	idempotency.ReasonKeyInUse:         http.StatusConflict,
	idempotency.ReasonKeyReused:        http.StatusUnprocessableEntity,
	idempotency.ReasonStoreUnavailable: http.StatusServiceUnavailable,
	idempotency.ReasonStoreFull:        http.StatusServiceUnavailable,
}

// handleError is the mux's error handler: the interceptor's errors become
// problems with the draft's statuses; every other error goes to c.next.
// A replayed error gets the replay header either way.
func (c *config) handleError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if replayed(ctx) {
		w.Header().Set(ReplayedHeader, "true")
	}
	st, ok := status.FromError(err)
	if !ok {
		c.next(ctx, mux, m, w, r, err)
		return
	}
	reason, retryInfo, ours := errorDetails(st)
	if !ours {
		c.next(ctx, mux, m, w, r, err)
		return
	}
	code, ok := statusOfReason[reason]
	if !ok {
		code = runtime.HTTPStatusFromCode(st.Code())
	}
	if after, ok := c.retryAfterOf(code, retryInfo); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(after), 10))
	}
	// The default handler still writes the server's metadata as headers and
	// trailers, as the mux is configured to; only the status and the body
	// are ours.
	runtime.DefaultHTTPErrorHandler(ctx, mux, problemMarshaler{Marshaler: m, status: code, reason: reason}, w, r,
		&runtime.HTTPStatusError{HTTPStatus: code, Err: err})
}

// errorDetails returns the ErrorInfo reason of st in the library's domain,
// and its RetryInfo delay when it has one.
func errorDetails(st *status.Status) (reason string, retryInfo *time.Duration, ours bool) {
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == idempotency.ErrorDomain {
				reason, ours = d.GetReason(), true
			}
		case *errdetails.RetryInfo:
			if d.GetRetryDelay().IsValid() {
				delay := d.GetRetryDelay().AsDuration()
				retryInfo = &delay
			}
		}
	}
	return reason, retryInfo, ours
}

// retryAfterOf returns the Retry-After of an answer: the status's RetryInfo
// when it has one, else the configured delay for a 503 or 429.
func (c *config) retryAfterOf(code int, retryInfo *time.Duration) (time.Duration, bool) {
	switch {
	case retryInfo != nil:
		return max(*retryInfo, 0), true
	case code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests:
		return c.retryAfter, true
	}
	return 0, false
}

// ceilSeconds is d in whole seconds, rounded up, as Retry-After wants them.
func ceilSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

// problem is an RFC 9457 problem details object of [ProblemType].
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason"`
}

// problemMarshaler writes the status that grpc-gateway's error handler
// marshals as a problem; anything else goes to the mux's marshaler.
type problemMarshaler struct {
	runtime.Marshaler
	status int
	reason string
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
	st, ok := v.(*spb.Status)
	if !ok {
		return p.Marshaler.Marshal(v)
	}
	detail := st.GetMessage()
	if p.reason == idempotency.ReasonKeyMissing {
		// The server names its metadata key; an HTTP client sends a header.
		detail = idempotency.ErrKeyMissing.Error() + ": send it in the " + KeyHeader + " header"
	}
	return json.Marshal(newProblem(p.status, p.reason, detail))
}

// newProblem returns the [ProblemType] problem of an answer with HTTP
// status code.
func newProblem(code int, reason, detail string) problem {
	return problem{Type: ProblemType, Title: http.StatusText(code), Status: code, Detail: detail, Reason: reason}
}

// writeProblem answers with the [ProblemType] problem of a refusal made
// before any gRPC call, so with no server metadata to forward.
func writeProblem(w http.ResponseWriter, code int, reason, detail string) {
	body, _ := json.Marshal(newProblem(code, reason, detail)) // strings and an int: no error
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
