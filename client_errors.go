package idempotency

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// statusError is a gRPC status error that carries this library's
// google.rpc.ErrorInfo, as the client interceptors return it: it reads as
// the status error (its text, and GRPCStatus, so status.FromError and
// status.Code give what they gave), and unwraps to it and to its cause:
// the sentinel of its reason, or the [*KeyError] the client refused a key
// with. So errors.Is(err, ErrKeyReused) holds.
type statusError struct {
	err   error // the status error, as the call returned it
	cause error // the sentinel of its reason, or a *KeyError
}

func (e *statusError) Error() string { return e.err.Error() }

// GRPCStatus returns the status of the status error, as status.FromError
// gives it.
func (e *statusError) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.err)
	return st
}

// Unwrap returns the status error and the cause.
func (e *statusError) Unwrap() []error { return []error{e.err, e.cause} }

// clientError returns err as the client interceptors return it: a gRPC
// status error with an ErrorInfo of [ErrorDomain] whose reason is one of
// the sentinels' is a [*statusError]; any other error is returned as it is.
func clientError(err error) error {
	if err == nil {
		return nil
	}
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return err // not a status: io.EOF, say
	}
	if _, ok := err.(*statusError); ok {
		return err
	}
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		ei, ok := d.(*errdetails.ErrorInfo)
		if !ok || ei.GetDomain() != ErrorDomain {
			continue
		}
		for _, f := range failures {
			if f.err.Reason == ei.GetReason() {
				return &statusError{err: err, cause: f.err}
			}
		}
	}
	return err
}

// passStream is a stream the client interceptor passes through: its
// errors are returned as [clientError] returns them.
type passStream struct{ grpc.ClientStream }

func (s passStream) SendMsg(m any) error { return clientError(s.ClientStream.SendMsg(m)) }
func (s passStream) RecvMsg(m any) error { return clientError(s.ClientStream.RecvMsg(m)) }
func (s passStream) CloseSend() error    { return clientError(s.ClientStream.CloseSend()) }

func (s passStream) Header() (metadata.MD, error) {
	h, err := s.ClientStream.Header()
	return h, clientError(err)
}
