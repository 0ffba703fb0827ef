package otelidempotency

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// UnaryClientInterceptor returns a client interceptor that starts one span
// per logical call and records on it how many attempts the call sent
// ([AttemptsKey]), a [RetryEvent] for each attempt that failed and was
// retried, with its reason, and the call's final gRPC code.
//
// Chain it before (outside) [idempotency.UnaryClientInterceptor], or before
// any other retry layer: it counts the attempts that the layers below it
// send with a grpc.OnFinish call option, which gRPC runs once per attempt.
// With otelgrpc's client stats handler on the connection, each attempt's
// span is a child of the call span.
//
// The call span is named as gRFC A72 names it ("Sent." and the method with
// dots, "Sent.payments.v1.Payments.Charge"), of kind internal, and started
// with the [WithTracerProvider] provider (default the global one).
func UnaryClientInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(opts)
	tracer := c.tracerProvider.Tracer(ScopeName)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		ctx, span := tracer.Start(ctx, callSpanName(method),
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(methodAttrs(c.semconv, method)...))
		defer span.End()
		var a attempts
		callOpts = append(callOpts[:len(callOpts):len(callOpts)], grpc.OnFinish(a.finished))
		err := invoker(ctx, method, req, reply, cc, callOpts...)
		a.record(span, err)
		return err
	}
}

// callSpanName returns "Sent.pkg.Service.Method" for "/pkg.Service/Method".
func callSpanName(method string) string {
	return "Sent." + strings.ReplaceAll(strings.TrimPrefix(method, "/"), "/", ".")
}

// attempts collects the attempts of one call, as gRPC reports their end.
type attempts struct {
	mu     sync.Mutex // a retry layer below may finish attempts on other goroutines
	n      int
	failed []failedAttempt
}

type failedAttempt struct {
	number int
	at     time.Time
	err    error
}

func (a *attempts) finished(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	if err != nil {
		a.failed = append(a.failed, failedAttempt{number: a.n, at: time.Now(), err: err})
	}
}

// record puts the attempts on span: their number, an event for each failed
// attempt that another attempt followed, and the final code.
func (a *attempts) record(span trace.Span, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	span.SetAttributes(AttemptsKey.Int(a.n))
	for _, f := range a.failed {
		if f.number == a.n {
			continue // the last attempt: its error is the call's, not a retry's
		}
		span.AddEvent(RetryEvent, trace.WithTimestamp(f.at), trace.WithAttributes(
			AttemptKey.Int(f.number),
			RetryReasonKey.String(retryReason(f.err)),
		))
	}
	st := status.Convert(err)
	span.SetAttributes(semconv.RPCResponseStatusCode(codeName(st.Code())))
	if err != nil {
		span.SetStatus(codes.Error, st.Message())
	}
}

// retryReason is the error's ErrorInfo reason in the library's domain, else
// its gRPC code.
func retryReason(err error) string {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idempotency.ErrorDomain {
			return ei.GetReason()
		}
	}
	return codeName(st.Code())
}

// codeName is the canonical name of a gRPC code, "DEADLINE_EXCEEDED", as
// rpc.response.status_code has it.
func codeName(c grpccodes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "CODE_" + strconv.FormatUint(uint64(c), 10)
}

var codeNames = [...]string{
	grpccodes.OK: "OK", grpccodes.Canceled: "CANCELLED", grpccodes.Unknown: "UNKNOWN",
	grpccodes.InvalidArgument: "INVALID_ARGUMENT", grpccodes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	grpccodes.NotFound: "NOT_FOUND", grpccodes.AlreadyExists: "ALREADY_EXISTS",
	grpccodes.PermissionDenied: "PERMISSION_DENIED", grpccodes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	grpccodes.FailedPrecondition: "FAILED_PRECONDITION", grpccodes.Aborted: "ABORTED",
	grpccodes.OutOfRange: "OUT_OF_RANGE", grpccodes.Unimplemented: "UNIMPLEMENTED",
	grpccodes.Internal: "INTERNAL", grpccodes.Unavailable: "UNAVAILABLE",
	grpccodes.DataLoss: "DATA_LOSS", grpccodes.Unauthenticated: "UNAUTHENTICATED",
}
