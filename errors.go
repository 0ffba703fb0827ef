package idempotency

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every error the
// interceptors return.
const ErrorDomain = "idempotency.grpc"

// Error is the type of the library's sentinel errors, one per situation a
// caller branches on with errors.Is: [ErrKeyReused] and the others. Reason
// is the situation's google.rpc.ErrorInfo reason, the one a server sends in
// [ErrorDomain] and [Reason] returns.
type Error struct {
	// Reason is the google.rpc.ErrorInfo reason, "IDEMPOTENCY_KEY_REUSED".
	Reason string
	// Message is the error's text.
	Message string
}

// Error returns e.Message.
func (e *Error) Error() string { return e.Message }

// The sentinel errors, one per situation, with the gRPC code a server
// answers it with and whether a retry with the same key can succeed
// (the table in [the client guide] has what to do). The interceptor turns
// them into gRPC statuses in one place at the edge; wrap them with %w to
// add detail.
//
// [the client guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/client.md#branching-on-the-error
var (
	// ErrKeyMissing: a MODE_REQUIRED method was called without a key
	// (INVALID_ARGUMENT, not retryable).
	ErrKeyMissing = &Error{Reason: "IDEMPOTENCY_KEY_MISSING", Message: "idempotency key required"}
	// ErrKeyInvalid: the key is empty, longer than [MaxKeyLen] bytes,
	// outside printable ASCII, or sent more than once (INVALID_ARGUMENT,
	// not retryable).
	ErrKeyInvalid = &Error{Reason: "IDEMPOTENCY_KEY_INVALID", Message: "idempotency key invalid"}
	// ErrKeyReused: the key was used with a different request
	// (FAILED_PRECONDITION, never retryable).
	ErrKeyReused = &Error{Reason: "IDEMPOTENCY_KEY_REUSED", Message: "idempotency key was already used with a different request"}
	// ErrKeyInUse: a call with the same key is in flight (ABORTED,
	// retryable with the same key after the RetryInfo delay).
	ErrKeyInUse = &Error{Reason: "IDEMPOTENCY_KEY_IN_USE", Message: "a request with this idempotency key is in progress; retry with the same key"}
	// ErrStoreUnavailable: the store could not be reached (UNAVAILABLE,
	// retryable).
	ErrStoreUnavailable = &Error{Reason: "IDEMPOTENCY_STORE_UNAVAILABLE", Message: "idempotency store unavailable"}
	// ErrRecordCorrupt: the stored record could not be read (INTERNAL, not
	// retryable).
	ErrRecordCorrupt = &Error{Reason: "IDEMPOTENCY_RECORD_CORRUPT", Message: "stored idempotency record is unreadable"}
	// ErrResponseNotRetained: the original outcome could not be kept
	// (larger than [WithMaxResponseBytes], not a proto message, or not
	// encodable), so it cannot be replayed (FAILED_PRECONDITION, not
	// retryable; the call did run).
	ErrResponseNotRetained = &Error{Reason: "IDEMPOTENCY_RESPONSE_NOT_RETAINED", Message: "the original response was too large to retain and cannot be replayed"}
	// ErrStoreFull: a bounded store has no room for a new key
	// (RESOURCE_EXHAUSTED, retryable with the same key after the RetryInfo
	// delay; the handler did not run).
	ErrStoreFull = &Error{Reason: "IDEMPOTENCY_STORE_FULL", Message: "idempotency store is full"}
	// ErrMisconfigured: the method's idempotency policy cannot work, so its
	// calls fail closed (INTERNAL, not retryable; see [MethodConfigError]).
	ErrMisconfigured = &Error{Reason: "IDEMPOTENCY_METHOD_MISCONFIGURED", Message: "the method's idempotency policy cannot work"}
	// ErrStreamTooLarge: the requests of a keyed streaming call are larger
	// than [WithMaxStreamRequestBytes] (INVALID_ARGUMENT, not retryable;
	// nothing was claimed and the handler did not run).
	ErrStreamTooLarge = &Error{Reason: "IDEMPOTENCY_STREAM_TOO_LARGE", Message: "the requests of the keyed stream are larger than the server holds"}
	// ErrResumeInvalid: the [ResumeAfterKey] metadata of a server-streaming
	// call is not one non-negative decimal integer (INVALID_ARGUMENT, not
	// retryable).
	ErrResumeInvalid = &Error{Reason: "IDEMPOTENCY_RESUME_INVALID", Message: "the resume position is not a non-negative integer"}

	// ErrOutcomeUnknown: the key's claim was abandoned (its server died or
	// hung past its lease while the handler may have run) and the
	// method's [AbandonPolicy] does not run the handler again. Nothing runs
	// until an operator resolves the key (docs/operations.md); retrying
	// the same key gets the same error, so clients do not retry it.
	ErrOutcomeUnknown = &Error{Reason: "IDEMPOTENCY_OUTCOME_UNKNOWN", Message: "an earlier attempt with this idempotency key was abandoned and its outcome is unknown; it will not run again until resolved"}
)

// KeyError says why a key was refused.
type KeyError struct {
	// Err is [ErrKeyMissing] or [ErrKeyInvalid].
	Err error
	// Detail says what is wrong, without echoing the key.
	Detail string
}

func (e *KeyError) Error() string {
	return e.Unwrap().Error() + ": " + e.Detail
}

// Unwrap returns Err: ErrKeyMissing, or ErrKeyInvalid when Err is nil.
func (e *KeyError) Unwrap() error {
	if e.Err == nil {
		return ErrKeyInvalid
	}
	return e.Err
}

// MethodConfigError says why one method's idempotency policy cannot work.
// [NewServer] panics with it (joined with errors.Join when
// there are several) for a method named by [WithMethodPolicy]; a method
// resolved on its first call fails its calls with INTERNAL,
// [ErrMisconfigured] and a message naming only the method and file,
// and reports it to the observer as the Err of [DecisionMisconfigured];
// [Server.Validate] returns it. It unwraps to [ErrMisconfigured].
type MethodConfigError struct {
	// Method is the full method name, "/pkg.Service/Method".
	Method string
	// File is the path of the proto file that declares the method, or ""
	// when it is not known.
	File string
	// Problem says what is wrong, for the server's logs.
	Problem string
}

// Error names the method, its file when known, and the problem.
func (e *MethodConfigError) Error() string {
	return "idempotency: " + e.where() + ": " + e.Problem
}

// Unwrap returns ErrMisconfigured.
func (e *MethodConfigError) Unwrap() error { return ErrMisconfigured }

func (e *MethodConfigError) where() string {
	if e.File == "" {
		return "method " + e.Method
	}
	return "method " + e.Method + " (" + e.File + ")"
}

type failure struct {
	err      *Error
	code     codes.Code
	decision Decision // reported when the error is returned; 0 when reported elsewhere
	// pushback: the answer asks the client to wait before retrying
	// (google.rpc.RetryInfo and the grpc-retry-pushback-ms trailer).
	pushback bool
}

var failures = []failure{
	{ErrKeyMissing, codes.InvalidArgument, DecisionKeyMissing, false},
	{ErrKeyInvalid, codes.InvalidArgument, DecisionKeyInvalid, false},
	{ErrKeyReused, codes.FailedPrecondition, DecisionKeyReused, false},
	{ErrKeyInUse, codes.Aborted, DecisionInFlight, true},
	{ErrStoreUnavailable, codes.Unavailable, DecisionStoreError, true},
	{ErrRecordCorrupt, codes.Internal, DecisionRecordCorrupt, false},
	{ErrResponseNotRetained, codes.FailedPrecondition, 0, false},
	{ErrStoreFull, codes.ResourceExhausted, DecisionStoreFull, true},
	{ErrMisconfigured, codes.Internal, DecisionMisconfigured, false},
	{ErrStreamTooLarge, codes.InvalidArgument, DecisionStreamTooLarge, false},
	{ErrResumeInvalid, codes.InvalidArgument, DecisionResumeInvalid, false},
	{ErrOutcomeUnknown, codes.FailedPrecondition, DecisionBlocked, false},
}

// failureOf returns the failure err is one of, if any.
func failureOf(err error) (failure, bool) {
	for _, f := range failures {
		if errors.Is(err, f.err) {
			return f, true
		}
	}
	return failure{}, false
}

// statusOf turns an interceptor error into the gRPC status the client sees:
// the code and ErrorInfo reason of its failure, and a RetryInfo when the
// client should wait before retrying (key in use, store unavailable or
// full). Only the interceptor's own text reaches the client;
// store errors are reduced to their sentinel's text.
func statusOf(f failure, err error, retryAfter time.Duration) *status.Status {
	msg := f.err.Error()
	var ke *KeyError
	var ce *MethodConfigError
	switch {
	case errors.As(err, &ke):
		msg = ke.Error()
	case errors.As(err, &ce): // what is wrong stays in the server's logs
		msg = "idempotency: " + ce.where() + " is misconfigured on the server"
	}
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: f.err.Reason, Domain: ErrorDomain}}
	if f.pushback {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	}
	st, derr := status.New(f.code, msg).WithDetails(details...)
	if derr != nil {
		return status.New(f.code, msg)
	}
	return st
}

// Reason returns the google.rpc.ErrorInfo reason of err: the Reason of the
// [*Error] err is or wraps, else that of a gRPC status error whose
// ErrorInfo is in [ErrorDomain]; "" for any other error. Branch with
// errors.Is(err, ErrKeyReused) on what this library returns (its client
// interceptors, [Do]); Reason is for logs, and for code that has only a
// status: a client without the interceptor compares Reason(err) ==
// ErrKeyReused.Reason.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason
	}
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}

// hookError is how [Do] returns an error of the scope function
// ([WithScope]) or of the fingerprint function ([WithFingerprint]): it
// says which one failed and wraps the cause, so errors.Is and errors.As
// find it, and status.FromError and status.Code find a gRPC status the
// cause is (or wraps) as the function returned it.
type hookError struct {
	scope bool // the scope function failed; else the fingerprint function
	keys  bool // with scope: Sealing.TenantKeys failed
	err   error
}

func (e *hookError) Error() string {
	if e.keys {
		return "idempotency: resolving the scope's sealing keys: " + e.err.Error()
	}
	if e.scope {
		return "idempotency: resolving the caller's scope: " + e.err.Error()
	}
	return "idempotency: computing the request fingerprint: " + e.err.Error()
}

// Unwrap returns the function's error.
func (e *hookError) Unwrap() error { return e.err }

// GRPCStatus returns the gRPC status of the function's error, nil when it
// has none.
func (e *hookError) GRPCStatus() *status.Status {
	if st, ok := status.FromError(e.err); ok {
		return st
	}
	return nil
}

// hookFailure is the [hookError] prepare returns, of a type of its own so
// that only the gRPC edge ([engine.fail]) and [Do] see it: an error a
// handler returns (one it had from Do, say) is never taken for it.
type hookFailure hookError

func (e *hookFailure) Error() string { return (*hookError)(e).Error() }

// status is the gRPC edge's answer (decision 7): a scope function's gRPC
// status as it is; INTERNAL, without the error's text, for any other
// error of the scope function and every error of the fingerprint function.
func (e *hookFailure) status() error {
	if e.scope {
		if st, ok := status.FromError(e.err); ok {
			return st.Err()
		}
		if e.keys {
			return status.Error(codes.Internal, "idempotency: resolving the scope's sealing keys failed")
		}
		return status.Error(codes.Internal, "idempotency: resolving the caller's scope failed")
	}
	return status.Error(codes.Internal, "idempotency: computing the request fingerprint failed")
}

// ErrNoClaim is returned by [NewTxOutcome] when the context carries no
// claim: the call is not deduplicated (no key, method disabled, failing
// open), or the context is not a handler's.
var ErrNoClaim = errors.New("idempotency: the context carries no claim")

// ErrHandlerTimeout is the cause (context.Cause) of a detached handler's
// context ending at its handler timeout ([WithHandlerTimeout]).
var ErrHandlerTimeout = errors.New("idempotency: the handler timeout passed")

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
	if _, ok := err.(*statusError); ok { //nolint:errorlint // already ours only when err itself is one: a wrapped one is converted below
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
