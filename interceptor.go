package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// UnaryServerInterceptor returns a server interceptor that runs each keyed
// call once per key and replays its stored outcome to every retry.
//
// It reads the key from request metadata ([MetadataKey]), claims it in s in
// one atomic step, runs the handler, and stores the response or
// deterministic error for the retention period. See the package
// documentation for the behaviour in every situation.
//
// Method policies are read from the registered proto descriptors, each
// method's once, on its first call. It panics when the options are invalid
// or the policy of a method named by [WithMethodPolicy] cannot work (see
// [MethodConfigError]): programming errors, found at start-up. A method
// whose proto option cannot work fails its calls closed instead; check
// them all at start-up with [ValidateServer].
func UnaryServerInterceptor(s store.Store, opts ...Option) grpc.UnaryServerInterceptor {
	i, err := newInterceptor(s, opts)
	if err != nil {
		panic(err)
	}
	return i.intercept
}

type interceptor struct {
	store   store.Store
	cfg     *config
	methods sync.Map // full method name -> *methodConfig
	flights flights
}

func newInterceptor(s store.Store, opts []Option) (*interceptor, error) {
	if s == nil {
		return nil, errors.New("idempotency: store must not be nil")
	}
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateMethods(); err != nil {
		return nil, err
	}
	return &interceptor{store: s, cfg: cfg}, nil
}

// call is one keyed call on its way through the interceptor. It holds
// everything an execution needs, so that an executed call allocates it once.
type call struct {
	method      string
	cfg         *methodConfig
	key         string // hashed store key
	fingerprint []byte
	storeTime   time.Duration

	claim   Claim         // set when this call owns the key
	renewal renewal       // lease renewal while the handler runs
	stream  captureStream // the handler's header and trailer

	// The outcome record and its timestamps, built in place once the
	// handler returns.
	record               idempotencyv1.Record
	createdAt, completed timestamppb.Timestamp
}

func (i *interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m := i.method(info.FullMethod, req)
	msg, isProto := req.(proto.Message)
	if m.mode == ModeDisabled || !isProto {
		return handler(ctx, req)
	}
	c, err := i.prepare(ctx, info.FullMethod, m, msg)
	if err != nil {
		return nil, i.fail(ctx, info.FullMethod, err, 0)
	}
	if c == nil { // OPTIONAL method called without a key
		return handler(ctx, req)
	}
	resp, err := i.run(ctx, c, req, handler)
	if err != nil {
		return nil, i.fail(ctx, c.method, err, c.storeTime)
	}
	return resp, nil
}

// prepare reads and validates the key and computes the store key and
// fingerprint. It returns nil, nil for an OPTIONAL call without a key.
func (i *interceptor) prepare(ctx context.Context, method string, m *methodConfig, req proto.Message) (*call, error) {
	key, err := i.clientKey(ctx, m, req)
	if err != nil {
		return nil, err
	}
	if key == "" {
		if m.mode == ModeRequired {
			return nil, &KeyError{Reason: ReasonKeyMissing, Detail: "send it in the " + strconv.Quote(i.cfg.metadataKey) + " metadata"}
		}
		return nil, nil
	}
	var scope string
	if i.cfg.scope != nil {
		if scope, err = i.cfg.scope(ctx); err != nil {
			if st, ok := status.FromError(err); ok {
				return nil, st.Err()
			}
			return nil, status.Error(codes.Internal, "idempotency: resolving the caller's scope failed")
		}
	}
	fp, err := i.cfg.fingerprint(method, req)
	if err != nil {
		return nil, status.Error(codes.Internal, "idempotency: computing the request fingerprint failed")
	}
	return &call{method: method, cfg: m, key: storeKey(method, scope, key), fingerprint: fp}, nil
}

// run claims the key and then executes, replays or rejects the call.
func (i *interceptor) run(ctx context.Context, c *call, req any, handler grpc.UnaryHandler) (any, error) {
	var until time.Time
	for attempt := 0; ; attempt++ {
		start := time.Now()
		cl, err := i.store.Claim(ctx, c.key, c.fingerprint, c.cfg.lease)
		c.storeTime += time.Since(start)
		if err != nil {
			return i.claimFailed(ctx, c, err, req, handler)
		}
		if cl.Won() {
			if err := ctx.Err(); err != nil {
				// The caller gave up while the claim was under way (a slow
				// store): nobody would get the answer, so don't run it.
				i.release(ctx, c, cl.Token, err)
				return nil, err
			}
			return i.execute(ctx, c, cl.Token, req, handler)
		}
		if !bytes.Equal(cl.Existing.Fingerprint, c.fingerprint) {
			return nil, ErrKeyReused
		}
		if cl.Existing.State == store.StateCompleted {
			resp, err := i.replay(ctx, c.cfg, cl.Existing.Data, c.fingerprint)
			if !errors.Is(err, ErrRecordCorrupt) {
				i.observe(ctx, c.method, OutcomeReplayed, c.storeTime, nil)
			}
			return resp, err
		}
		if i.cfg.wait <= 0 {
			return nil, ErrKeyInUse
		}
		if attempt == 0 {
			until = time.Now().Add(i.cfg.wait)
		}
		if !i.flights.wait(ctx, c.key, until, attempt) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, ErrKeyInUse
		}
	}
}

// claimFailed handles a Claim error: fail closed, or fail open when
// configured and the store itself is at fault.
func (i *interceptor) claimFailed(ctx context.Context, c *call, err error, req any, handler grpc.UnaryHandler) (any, error) {
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, store.ErrCorrupt):
		return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
	case errors.Is(err, store.ErrFull):
		return nil, fmt.Errorf("%w: %w", ErrStoreFull, err)
	case i.cfg.failOpen:
		i.observe(ctx, c.method, OutcomeFailOpen, c.storeTime, err)
		return handler(ctx, req)
	default:
		return nil, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
}

// execute runs the handler under the claim and stores or releases it.
func (i *interceptor) execute(ctx context.Context, c *call, token string, req any, handler grpc.UnaryHandler) (any, error) {
	if i.cfg.wait > 0 {
		defer i.flights.start(c.key)()
	}
	createdAt := time.Now()
	c.createdAt.Seconds, c.createdAt.Nanos = createdAt.Unix(), int32(createdAt.Nanosecond())
	c.claim = Claim{Key: c.key, Token: token}
	c.renewal.start(i, ctx, c)
	hctx := context.WithValue(ctx, claimKey{}, &c.claim)
	if c.stream.ServerTransportStream = grpc.ServerTransportStreamFromContext(ctx); c.stream.ServerTransportStream != nil {
		hctx = grpc.NewContextWithServerTransportStream(hctx, &c.stream)
	}

	finished := false
	defer func() {
		if !finished { // the handler panicked: release and let the panic go on
			c.renewal.stop()
			i.release(ctx, c, token, nil)
		}
	}()
	resp, herr := handler(hctx, req)
	finished = true
	lost := c.renewal.stop()

	data, keep := i.outcome(ctx, c, resp, herr)
	if !keep {
		i.release(ctx, c, token, herr)
		return resp, herr
	}
	defer putBuffer(data)
	if lost {
		// Completing would be refused; the observer was told when renewal
		// found out. The handler's answer still goes back.
		return resp, herr
	}
	i.complete(ctx, c, token, *data)
	return resp, herr
}

// complete stores the outcome. A transient store error is retried with
// backoff for up to the store timeout, since giving up leaves the key in
// flight until its lease ends, after which a retry would run the handler
// again. The store call is detached from the caller's cancellation: the
// handler ran, so its outcome must land even if the caller has gone.
func (i *interceptor) complete(ctx context.Context, c *call, token string, data []byte) {
	sctx := context.WithoutCancel(ctx)
	giveUp := time.Now().Add(i.cfg.storeTimeout)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := i.store.Complete(sctx, c.key, token, data, c.cfg.retention)
		c.storeTime += time.Since(start)
		switch {
		case err == nil:
			i.observe(ctx, c.method, OutcomeExecuted, c.storeTime, nil)
			return
		case errors.Is(err, store.ErrLeaseLost):
			i.observe(ctx, c.method, OutcomeLeaseLost, c.storeTime, err)
			return
		}
		i.observe(ctx, c.method, OutcomeStoreError, c.storeTime, err)
		wait := pollDelay(attempt)
		if time.Now().Add(wait).After(giveUp) {
			return
		}
		time.Sleep(wait)
	}
}

func (i *interceptor) release(ctx context.Context, c *call, token string, cause error) {
	start := time.Now()
	err := i.store.Release(context.WithoutCancel(ctx), c.key, token)
	c.storeTime += time.Since(start)
	switch {
	case err == nil:
		i.observe(ctx, c.method, OutcomeReleased, c.storeTime, cause)
	case errors.Is(err, store.ErrLeaseLost):
		i.observe(ctx, c.method, OutcomeLeaseLost, c.storeTime, err)
	default:
		i.observe(ctx, c.method, OutcomeStoreError, c.storeTime, err)
	}
}

func (i *interceptor) observe(ctx context.Context, method string, o Outcome, took time.Duration, err error) {
	i.cfg.observer.Observe(ctx, Event{Method: method, Outcome: o, StoreTime: took, Err: err})
}

// fail reports the interceptor's own errors to the observer and turns them
// into the status the client sees. Handler errors and replayed statuses pass
// through unchanged.
func (i *interceptor) fail(ctx context.Context, method string, err error, storeTime time.Duration) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if _, ok := status.FromError(err); !ok {
			return status.FromContextError(err).Err()
		}
		return err
	}
	f, own := failureOf(err)
	if !own {
		return err
	}
	if f.outcome != 0 {
		i.observe(ctx, method, f.outcome, storeTime, err)
	}
	if f.reason == ReasonKeyInUse {
		ms := strconv.FormatInt(i.cfg.retryAfter.Milliseconds(), 10)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(pushbackKey, ms))
	}
	return statusOf(f, err, i.cfg.retryAfter).Err()
}
