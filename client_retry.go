package idempotency

import (
	"context"
	"math"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency/internal/clientretry"
)

// pushbackKey is the trailer in which a server asks for a retry delay, in
// milliseconds (gRFC A6).
const pushbackKey = "grpc-retry-pushback-ms"

// invokeWithRetry makes up to maxAttempts attempts of a call whose key is
// already in ctx's outgoing metadata.
func (c *clientInterceptor) invokeWithRetry(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	// Capture each attempt's trailer for its pushback. gRPC fills every
	// Trailer and Header option of an attempt, so a caller's own options
	// still end up with the last attempt's metadata.
	var trailer metadata.MD
	attemptOpts := make([]grpc.CallOption, len(opts), len(opts)+1)
	copy(attemptOpts, opts)
	attemptOpts = append(attemptOpts, grpc.Trailer(&trailer))

	for attempt := 1; ; attempt++ {
		trailer = nil
		err := c.attempt(ctx, method, req, reply, cc, invoker, attemptOpts)
		if err == nil {
			return nil
		}
		if err := c.beforeRetry(ctx, attempt, err, trailer, c.cfg.perAttemptTimeout > 0); err != nil {
			return err
		}
	}
}

// beforeRetry decides whether a call whose attempt number attempt failed
// with err, and whose trailer was trailer, is retried. When it is, it
// waits for the delay, calls the [WithOnRetry] hook and returns nil;
// otherwise it returns the error the call ends with: err, or CANCELED
// when the context ends during the wait. timedOut says whether the
// attempt had a per-attempt timeout, whose DEADLINE_EXCEEDED is retried.
func (c *clientInterceptor) beforeRetry(ctx context.Context, attempt int, err error, trailer metadata.MD, timedOut bool) error {
	if attempt >= c.cfg.maxAttempts {
		return err
	}
	st, retryable := retryable(err, timedOut)
	if !retryable {
		return err
	}
	delay, ok := c.delay(ctx, attempt, st, trailer)
	if !ok {
		return err // no retry asked for, or it could not start in time
	}
	if werr := clientretry.Wait(ctx, delay); werr != nil {
		return status.FromContextError(werr).Err() // cancelled: CANCELED, as grpc-go's own retries do
	}
	if c.cfg.onRetry != nil {
		c.cfg.onRetry(ctx, attempt+1, err)
	}
	return nil
}

// attempt makes one attempt, within the per-attempt timeout if one is set.
func (c *clientInterceptor) attempt(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	if c.cfg.perAttemptTimeout <= 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.perAttemptTimeout)
	defer cancel()
	return invoker(actx, method, req, reply, cc, opts...)
}

// retryable reports whether a call that failed with err may be retried with
// its key: UNAVAILABLE; ABORTED with ErrKeyInUse.Reason in ErrorDomain;
// RESOURCE_EXHAUSTED with ErrStoreFull.Reason in ErrorDomain (the claim was
// refused, so the handler did not run; any other RESOURCE_EXHAUSTED, such as
// a rate limit or a message too large, is not retried); and
// DEADLINE_EXCEEDED when the attempt had a per-attempt timeout (timedOut;
// if the caller's own deadline has passed, the deadline check returns the
// error instead).
func retryable(err error, timedOut bool) (*status.Status, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	switch st.Code() {
	case codes.Unavailable:
		return st, true
	case codes.Aborted:
		return st, hasReason(st, ErrKeyInUse.Reason)
	case codes.ResourceExhausted:
		return st, hasReason(st, ErrStoreFull.Reason)
	case codes.DeadlineExceeded:
		return st, timedOut
	}
	return st, false
}

// hasReason reports whether st carries a google.rpc.ErrorInfo with reason
// in ErrorDomain.
func hasReason(st *status.Status, reason string) bool {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == ErrorDomain && ei.GetReason() == reason {
			return true
		}
	}
	return false
}

// delay returns the wait before the retry that follows attempt: the
// backoff, raised to the server's pushback when that is longer
// ([clientretry.Delay]). It reports false when the server asks for no
// retry: a negative or malformed pushback trailer (gRFC A6), a RetryInfo
// that is not a valid duration, or either one longer than the cap
// ([WithMaxPushback]); or when the wait would end at or after ctx's
// deadline.
func (c *clientInterceptor) delay(ctx context.Context, attempt int, st *status.Status, trailer metadata.MD) (time.Duration, bool) {
	var pushback time.Duration
	if vals := trailer.Get(pushbackKey); len(vals) > 0 {
		ms, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || ms < 0 {
			return 0, false
		}
		pushback = millis(ms)
	}
	for _, detail := range st.Details() {
		ri, ok := detail.(*errdetails.RetryInfo)
		if !ok || ri.GetRetryDelay() == nil {
			continue
		}
		if !ri.GetRetryDelay().IsValid() {
			return 0, false
		}
		pushback = max(pushback, ri.GetRetryDelay().AsDuration())
	}
	return clientretry.Delay(ctx, c.cfg.backoff, attempt, pushback, c.cfg.maxPushback)
}

func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
