package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// Server is the idempotency side of a gRPC server, built once with
// [NewServer] from a store and the options: its interceptor and its
// start-up check ([Server.Validate]) read the same options, so they cannot
// drift apart.
type Server struct {
	i *interceptor
}

// NewServer returns the idempotency server over store s, configured by
// opts.
//
// It panics when the options are invalid or the policy of a method named
// by [WithMethodPolicy] cannot work (see [MethodConfigError]): programming
// errors, found at start-up. It checks only those methods, since it cannot
// know which services the gRPC server will register; a method whose proto
// option cannot work fails its calls closed instead. Check them all at
// start-up with [Server.Validate].
func NewServer(s store.Store, opts ...ServerOption) *Server {
	i, err := newInterceptor(s, opts)
	if err != nil {
		panic(err)
	}
	return &Server{i: i}
}

// UnaryServerInterceptor returns the server interceptor that runs each
// keyed call once per key and replays its stored outcome to every retry.
//
// It reads the key from request metadata ([MetadataKey]), claims it in the
// store in one atomic step, runs the handler, and stores the response or
// deterministic error for the retention period. See the package
// documentation for the behaviour in every situation.
//
// Method policies are read from the registered proto descriptors, each
// method's once, on its first call. A method without an
// idempotency.v1.method option or a [WithMethodPolicy] takes the mode of
// [WithDefaultMode] (OPTIONAL by default); methods marked NO_SIDE_EFFECTS,
// and the methods of gRPC's own services (proto package "grpc" or
// "grpc.*": health, reflection, channelz, lb) that [WithMethodPolicy] does
// not name, pass through untouched. Every interceptor s returns shares the
// method cache and the in-flight waiters ([WithWaitForInFlight]).
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return s.i.intercept
}

// UnaryServerInterceptor is shorthand for
// NewServer(s, opts...).UnaryServerInterceptor(), for a server that does
// not run the start-up check [Server.Validate]. It panics as [NewServer]
// does.
func UnaryServerInterceptor(s store.Store, opts ...ServerOption) grpc.UnaryServerInterceptor {
	return NewServer(s, opts...).UnaryServerInterceptor()
}

type interceptor struct {
	store   store.Store
	cfg     *config
	methods sync.Map // full method name -> *methodConfig
	flights flights
}

func newInterceptor(s store.Store, opts []ServerOption) (*interceptor, error) {
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
	i           *interceptor
	method      string
	cfg         *methodConfig
	key         string // hashed store key
	fingerprint []byte
	storeTime   time.Duration

	claim      Claim           // set when this call owns the key
	claimedAt  time.Time       // when the winning claim was sent
	detached   context.Context // the caller's, without its cancellation, for the claim's store calls
	renewal    renewal         // lease renewal until the claim is settled
	stream     captureStream   // the handler's header and trailer
	txRecorded atomic.Bool     // the handler's transaction recorded the outcome ([TxOutcome.Recorded])
	derived    derivedCalls    // the handler's outgoing calls that took a derived key ([WithDerivedKeys])

	// The handler's context: cancelCause ends it (with a cause on lease
	// loss); stopTimer releases its handler-timeout timer, if any.
	cancelCause context.CancelCauseFunc
	stopTimer   context.CancelFunc

	// The outcome record and its timestamps, built in place once the
	// handler returns.
	record               recordv1.Record
	createdAt, completed timestamppb.Timestamp
}

func (i *interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m := i.method(info.FullMethod, req)
	msg, isProto := req.(proto.Message)
	if m.mode == ModeDisabled || !isProto {
		return passThrough(ctx, req, handler)
	}
	c, err := i.prepare(ctx, info.FullMethod, m, msg)
	if err != nil {
		return nil, i.fail(ctx, info.FullMethod, err, 0)
	}
	if c == nil || i.claimedOutside(ctx, c) { // OPTIONAL method called without a key, or wrapped twice
		return passThrough(ctx, req, handler)
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
	return &call{i: i, method: method, cfg: m, key: storeKey(method, scope, key), fingerprint: fp}, nil
}

// run claims the key and then executes, replays or rejects the call.
func (i *interceptor) run(ctx context.Context, c *call, req any, handler grpc.UnaryHandler) (any, error) {
	var until time.Time
	for attempt := 0; ; attempt++ {
		start := time.Now()
		cl, err := i.claim(ctx, c)
		c.storeTime += time.Since(start)
		if err != nil {
			return i.claimFailed(ctx, c, err, req, handler)
		}
		if cl.Won() {
			c.claim, c.claimedAt = Claim{StoreKey: c.key, Token: cl.Token}, start
			c.detached = context.WithoutCancel(ctx)
			if err := ctx.Err(); err != nil {
				// The caller gave up while the claim was under way (a slow
				// store): nobody would get the answer, so don't run it.
				i.release(ctx, c, err)
				return nil, err
			}
			return i.execute(ctx, c, req, handler)
		}
		if !bytes.Equal(cl.Existing.Fingerprint, c.fingerprint) {
			return nil, ErrKeyReused
		}
		if cl.Existing.State == store.StateCompleted {
			resp, err := i.replay(ctx, c.cfg, cl.Existing.Data, c.fingerprint)
			if !errors.Is(err, ErrRecordCorrupt) {
				i.observe(ctx, c.method, DecisionReplayed, c.storeTime, nil)
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

// claim claims c's key, bounded by the store timeout and the caller's
// deadline (the timer is set only when the caller's deadline is later).
func (i *interceptor) claim(ctx context.Context, c *call) (store.ClaimResult, error) {
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > i.cfg.storeTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, i.cfg.storeTimeout)
		defer cancel()
	}
	return i.store.Claim(ctx, c.key, c.fingerprint, c.cfg.lease)
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
		i.observe(ctx, c.method, DecisionFailOpen, c.storeTime, err)
		return passThrough(ctx, req, handler)
	default:
		return nil, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
}

func (i *interceptor) observe(ctx context.Context, method string, d Decision, took time.Duration, err error) {
	attempt := 0
	if d == DecisionStoreError { // a store call tried once
		attempt = 1
	}
	i.cfg.observer.Observe(ctx, Event{Method: method, Decision: d, StoreTime: took, Err: err, Attempt: attempt})
}

// storeError reports one failed attempt, numbered from 1, of a store step
// that is retried; took is that attempt's time alone.
func (i *interceptor) storeError(ctx context.Context, method string, attempt int, took time.Duration, err error) {
	i.cfg.observer.Observe(ctx, Event{Method: method, Decision: DecisionStoreError, StoreTime: took, Err: err, Attempt: attempt})
}

// fail reports the interceptor's own errors to the observer and turns them
// into the status the client sees. Handler errors and replayed statuses pass
// through unchanged.
func (i *interceptor) fail(ctx context.Context, method string, err error, storeTime time.Duration) error {
	f, own := failureOf(err)
	if !own {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			if _, ok := status.FromError(err); !ok {
				return status.FromContextError(err).Err()
			}
		}
		return err
	}
	if f.decision != 0 {
		i.observe(ctx, method, f.decision, storeTime, err)
	}
	if f.pushback {
		ms := strconv.FormatInt(i.cfg.retryAfter.Milliseconds(), 10)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(pushbackKey, ms))
	}
	return statusOf(f, err, i.cfg.retryAfter).Err()
}
