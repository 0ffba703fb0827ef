package connectidempotency

import (
	"errors"
	"strings"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/grpc-idempotency/idempotency"
)

// connect-go's codes are gRPC's, number for number, so a *connect.Error is
// a gRPC status: its code, its message (what connect-go sends as the
// message) and its details. The interceptors decide from the status what
// is stored and what is retried; the caller gets a *connect.Error.

// statusOf returns the gRPC status of ce.
func statusOf(ce *connect.Error) *status.Status {
	p := &spb.Status{Code: int32(ce.Code()), Message: ce.Message()}
	for _, d := range ce.Details() {
		p.Details = append(p.Details, &anypb.Any{TypeUrl: typeURLPrefix + d.Type(), Value: d.Bytes()})
	}
	return status.FromProto(p)
}

const typeURLPrefix = "type.googleapis.com/"

// statusError is a connect-go error as the interceptors see it: the
// status of the *connect.Error it is or wraps (as connect-go finds it, with
// errors.As), and the error itself, which it unwraps to.
type statusError struct {
	err error
	st  *status.Status
}

func (e *statusError) Error() string              { return e.err.Error() }
func (e *statusError) Unwrap() error              { return e.err }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// asStatus returns err, a connect-go handler's or call's error, as a gRPC
// status error; an error that is not a *connect.Error and does not wrap one
// as it is: to the interceptors it is not a status, as a plain error a
// grpc-go handler returns is not, and it is never stored.
func asStatus(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce == nil {
		return err
	}
	return &statusError{err: err, st: statusOf(ce)}
}

// fromStatus returns err, an answer of the interceptors (a replayed status,
// one of their refusals, a key the client refused), as a *connect.Error
// with the status's code, message and details, which unwraps to err (and
// so to the library's sentinel: errors.Is(err, idempotency.ErrKeyInUse)).
// An error that is not a status is returned as it is.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	text := st.Message()
	if idempotency.Reason(err) == idempotency.ErrKeyMissing.Reason {
		// The server names where a grpc-go client puts its key, its
		// metadata; connect-go carries that as headers on every protocol,
		// and calls them so.
		if t, ok := strings.CutSuffix(text, " metadata"); ok {
			text = t + " header"
		}
	}
	ce := connect.NewError(connect.Code(st.Code()), &message{text: text, err: err})
	for _, d := range st.Proto().GetDetails() {
		if cd, derr := connect.NewErrorDetail(d); derr == nil {
			ce.AddDetail(cd)
		}
	}
	return ce
}

// message is the underlying error of a *connect.Error made from a status:
// its text is the status message, which connect-go sends as the error's
// message, and it unwraps to the error it was made from.
type message struct {
	text string
	err  error
}

func (m *message) Error() string { return m.text }
func (m *message) Unwrap() error { return m.err }

// sendError is the error of a connect-go send as the stream interceptor
// reads it: a message refused for itself (over the send limit:
// RESOURCE_EXHAUSTED; one the codec cannot encode: INTERNAL) keeps its
// code, and the stream goes on; any other failure is a write to a stream
// that has ended (the caller left or cancelled, its deadline passed, the
// connection broke: connect-go says CANCELED, DEADLINE_EXCEEDED or UNKNOWN
// "write envelope"), which grpc-go reports as UNAVAILABLE, CANCELED or
// DEADLINE_EXCEEDED, and the interceptor takes for a caller that has left.
func sendError(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce == nil {
		return &statusError{err: err, st: status.New(codes.Unavailable, err.Error())}
	}
	st := statusOf(ce)
	switch ce.Code() {
	case connect.CodeResourceExhausted, connect.CodeInternal, connect.CodeCanceled, connect.CodeDeadlineExceeded:
	default:
		st = status.New(codes.Unavailable, ce.Message())
	}
	return &statusError{err: err, st: st}
}
