package httpidempotency

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// ProblemType is the RFC 9457 problem type of every error the library
// answers over HTTP, here and in gatewayidempotency. Its "reason" member is
// the google.rpc.ErrorInfo reason ([idempotency.ErrKeyInUse] and the
// others, or [ErrRequestTooLarge]); "detail" says what happened; "title"
// and "status" are those of the HTTP status.
const ProblemType = "https://pkg.go.dev/github.com/grpc-idempotency/idempotency/httpidempotency#ProblemType"

// ProblemTypeOutcomeUnknown is the RFC 9457 problem type of the one
// refusal that is not [ProblemType]'s: a key whose claim was abandoned
// (its server died or hung past its lease while the handler may have run)
// and that the operation's [idempotency.AbandonPolicy] blocks, answered
// 423 Locked with reason IDEMPOTENCY_OUTCOME_UNKNOWN
// ([idempotency.ErrOutcomeUnknown]) and no Retry-After. It has a type of
// its own because it asks something of its reader that no other problem
// does: not to retry, nor to send the request again under a new key,
// since its work may have been done, but to have an operator resolve the
// key (docs/operations.md). Its members are [ProblemType]'s.
const ProblemTypeOutcomeUnknown = "https://pkg.go.dev/github.com/grpc-idempotency/idempotency/httpidempotency#ProblemTypeOutcomeUnknown"

// ProblemContentType is the media type of a [ProblemType] body.
const ProblemContentType = "application/problem+json"

// ErrRequestTooLarge is the error of a keyed request whose body is longer
// than [WithMaxRequestBytes], answered 413 with its Reason: the middleware
// cannot fingerprint it, so it claims nothing and the handler does not run.
var ErrRequestTooLarge = &idempotency.Error{
	Reason:  "IDEMPOTENCY_REQUEST_TOO_LARGE",
	Message: "the request body is longer than the idempotency middleware reads",
}

// defaultRetryAfter is the Retry-After [StatusOf] gives when err carries
// none: the default of [idempotency.WithRetryAfter].
const defaultRetryAfter = time.Second

// statusOfReason is the one mapping of the library's errors to HTTP
// statuses: the IETF draft's for the reasons it names, and for the others
// the status that google.rpc's code mapping gives their gRPC code.
var statusOfReason = map[string]int{
	idempotency.ErrKeyMissing.Reason:          http.StatusBadRequest,
	idempotency.ErrKeyInvalid.Reason:          http.StatusBadRequest,
	idempotency.ErrKeyInUse.Reason:            http.StatusConflict,
	idempotency.ErrKeyReused.Reason:           http.StatusUnprocessableEntity,
	idempotency.ErrStoreUnavailable.Reason:    http.StatusServiceUnavailable,
	idempotency.ErrStoreFull.Reason:           http.StatusServiceUnavailable,
	idempotency.ErrResponseNotRetained.Reason: http.StatusBadRequest, // FAILED_PRECONDITION
	idempotency.ErrRecordCorrupt.Reason:       http.StatusInternalServerError,
	idempotency.ErrMisconfigured.Reason:       http.StatusInternalServerError,
	idempotency.ErrStreamTooLarge.Reason:      http.StatusBadRequest, // INVALID_ARGUMENT
	idempotency.ErrResumeInvalid.Reason:       http.StatusBadRequest, // INVALID_ARGUMENT
	idempotency.ErrOutcomeUnknown.Reason:      http.StatusLocked,     // decision 299
	ErrRequestTooLarge.Reason:                 http.StatusRequestEntityTooLarge,
}

// StatusOf returns the HTTP status of err and the Retry-After it calls for.
// err is one of the library's errors: a sentinel such as
// [idempotency.ErrKeyInUse] (wrapped or not), [ErrRequestTooLarge], or a
// gRPC status error of the interceptor, told apart by its
// google.rpc.ErrorInfo reason:
//
//	reason                               HTTP status                  Retry-After
//	IDEMPOTENCY_KEY_MISSING              400 Bad Request
//	IDEMPOTENCY_KEY_INVALID              400 Bad Request
//	IDEMPOTENCY_KEY_IN_USE               409 Conflict                 Retry-After
//	IDEMPOTENCY_KEY_REUSED               422 Unprocessable Entity
//	IDEMPOTENCY_STORE_UNAVAILABLE        503 Service Unavailable      Retry-After
//	IDEMPOTENCY_STORE_FULL               503 Service Unavailable      Retry-After
//	IDEMPOTENCY_RESPONSE_NOT_RETAINED    400 Bad Request
//	IDEMPOTENCY_RECORD_CORRUPT           500 Internal Server Error
//	IDEMPOTENCY_METHOD_MISCONFIGURED     500 Internal Server Error
//	IDEMPOTENCY_STREAM_TOO_LARGE         400 Bad Request
//	IDEMPOTENCY_RESUME_INVALID           400 Bad Request
//	IDEMPOTENCY_REQUEST_TOO_LARGE        413 Request Entity Too Large
//	IDEMPOTENCY_OUTCOME_UNKNOWN          423 Locked
//
// Any other gRPC status, wrapped or not (a [idempotency.WithScope]
// function's UNAUTHENTICATED, say), has the HTTP status of its code in
// google.rpc's mapping, as grpc-gateway answers it: 401 UNAUTHENTICATED,
// 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ABORTED and ALREADY_EXISTS,
// 400 INVALID_ARGUMENT, FAILED_PRECONDITION and OUT_OF_RANGE, 429
// RESOURCE_EXHAUSTED, 499 CANCELLED, 501 UNIMPLEMENTED, 503 UNAVAILABLE,
// 504 DEADLINE_EXCEEDED, 500 the others. Any other error is 500.
// retryAfter is the google.rpc.RetryInfo delay err carries, else 1 s (the
// default of [idempotency.WithRetryAfter]) for a 409, 429 or 503, else 0;
// a Retry-After header is due on a 409, 429 or 503 answer.
func StatusOf(err error) (status int, retryAfter time.Duration) {
	code, ok := statusOfReason[idempotency.Reason(err)]
	if !ok {
		code = statusOfCode(err)
	}
	if d, ok := retryInfo(err); ok {
		return code, d
	}
	if wantsRetryAfter(code) {
		return code, defaultRetryAfter
	}
	return code, 0
}

// statusOfCode returns the HTTP status of err's gRPC code, 500 when err
// is not a gRPC status.
func statusOfCode(err error) int {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return http.StatusInternalServerError
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Canceled:
		return statusClientClosedRequest
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	default: // OK (a status error cannot be OK), UNKNOWN, INTERNAL, DATA_LOSS
		return http.StatusInternalServerError
	}
}

// statusClientClosedRequest is google.rpc's HTTP status of CANCELLED,
// which net/http does not name.
const statusClientClosedRequest = 499

// titleOf is the title of a problem with HTTP status code.
func titleOf(code int) string {
	if code == statusClientClosedRequest {
		return "Client Closed Request"
	}
	return http.StatusText(code)
}

// retryInfo returns the google.rpc.RetryInfo delay of a gRPC status error.
func retryInfo(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// wantsRetryAfter reports whether an answer with status code asks the
// client to come back later.
func wantsRetryAfter(code int) bool {
	return code == http.StatusConflict || code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// Problem is the RFC 9457 problem details object of one of the library's
// errors, a [ProblemType] body.
type Problem struct {
	// Type is [ProblemType], or [ProblemTypeOutcomeUnknown] for a key
	// blocked after an abandoned claim.
	Type string `json:"type"`
	// Title is the text of Status, "Conflict".
	Title string `json:"title"`
	// Status is the HTTP status, as [StatusOf] gives it.
	Status int `json:"status"`
	// Detail says what happened, without backend error text.
	Detail string `json:"detail,omitempty"`
	// Reason is the error's google.rpc.ErrorInfo reason, "" for an error
	// that is not the library's.
	Reason string `json:"reason"`
	// RetryAfter is sent as the Retry-After header (in whole seconds,
	// rounded up) on a 409, 429 or 503 answer; it is not part of the body.
	RetryAfter time.Duration `json:"-"`
}

// ProblemOf returns the problem of err, with [StatusOf]'s status and
// Retry-After. Its detail is the message of err's sentinel (the
// [idempotency.KeyError]'s text for a refused key, the status's own
// message for a gRPC status, not the text of errors wrapped around it),
// else the title: backend error text wrapped inside never reaches the
// client.
func ProblemOf(err error) Problem {
	code, after := StatusOf(err)
	p := Problem{
		Type: typeOf(err), Title: titleOf(code), Status: code,
		Detail: detailOf(err), Reason: idempotency.Reason(err), RetryAfter: after,
	}
	if p.Detail == "" { // a status without a message
		p.Detail = p.Title
	}
	return p
}

// typeOf returns the problem type of err: [ProblemTypeOutcomeUnknown]
// for [idempotency.ErrOutcomeUnknown], else [ProblemType].
func typeOf(err error) string {
	if idempotency.Reason(err) == idempotency.ErrOutcomeUnknown.Reason {
		return ProblemTypeOutcomeUnknown
	}
	return ProblemType
}

// sentinels are the errors whose text a problem's detail may carry.
var sentinels = []error{
	idempotency.ErrKeyMissing, idempotency.ErrKeyInvalid, idempotency.ErrKeyReused,
	idempotency.ErrKeyInUse, idempotency.ErrStoreUnavailable, idempotency.ErrRecordCorrupt,
	idempotency.ErrResponseNotRetained, idempotency.ErrStoreFull, idempotency.ErrMisconfigured,
	idempotency.ErrOutcomeUnknown, ErrRequestTooLarge,
}

func detailOf(err error) string {
	var ke *idempotency.KeyError
	if errors.As(err, &ke) {
		return ke.Error()
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	// The status's own message: status.FromError would give a wrapped
	// status the text of every error around it.
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) && gs.GRPCStatus() != nil {
		return gs.GRPCStatus().Message()
	}
	return http.StatusText(http.StatusInternalServerError)
}

// SetHeaders sets the headers of p's answer on h: Content-Type
// [ProblemContentType] and, on a 409, 429 or 503, Retry-After.
func (p Problem) SetHeaders(h http.Header) {
	h.Set("Content-Type", ProblemContentType)
	if wantsRetryAfter(p.Status) {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(p.RetryAfter.Seconds())), 10))
	}
}

// Write answers with p: its headers, its status and its JSON body.
func (p Problem) Write(w http.ResponseWriter) {
	body, _ := json.Marshal(p) // strings and an int: no error
	p.SetHeaders(w.Header())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// WriteProblem answers err with its problem: ProblemOf(err).Write(w).
func WriteProblem(w http.ResponseWriter, err error) {
	ProblemOf(err).Write(w)
}
