package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// engine runs the protocol, whatever brings the work to it: claim the key
// with the request's fingerprint, run the work once under a renewed lease,
// store its outcome or release the claim, replay the outcome to every later
// call, wait for an in-flight original. It knows nothing of gRPC's
// transport: each entry point (the unary interceptor, [Do]) gives it a
// [transport], the one seam between the two.
type engine struct {
	store   store.Store
	cfg     *config
	methods sync.Map                 // full method name -> *methodConfig
	ops     map[string]*methodConfig // of the operations WithOperationPolicy names
	otherOp *methodConfig            // of every other operation
	flights flights
	cache   *replayCache // nil without WithReplayCache
}

func newEngine(s store.Store, opts []ServerOption) (*engine, error) {
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
	e := &engine{store: s, cfg: cfg, cache: newReplayCache(cfg.cache)}
	e.ops, e.otherOp = cfg.operations()
	return e, nil
}

// call is one keyed call on its way through the engine. It holds
// everything an execution needs, so that an executed call allocates it once
// (an entry point embeds it in its own transport value).
type call struct {
	e           *engine
	t           transport // the entry point's side of the call
	method      string    // full method name or operation, for the observer
	cfg         *methodConfig
	key         string // hashed store key
	fingerprint []byte
	fpArray     [fingerprintSize]byte // holds fingerprint when the default computes it
	isReplay    bool                  // the answer is a stored outcome
	// ownRequest: the request is the call's own ([Do]), not the outer
	// call's again (an interceptor nested in another): nested in a claim,
	// its fingerprint must be the claim's ([engine.claimedOutside]).
	ownRequest bool
	storeTime  time.Duration

	claim      Claim           // set when this call owns the key
	claimedAt  time.Time       // when the winning claim was sent
	caller     context.Context // the caller's: the claim's store calls detach from its cancellation
	renewal    renewal         // lease renewal until the claim is settled
	txRecorded atomic.Bool     // the work's transaction recorded the outcome ([TxOutcome.Recorded])
	nesting    nesting         // the call nested in the work, if any ([engine.claimedOutside])
	derived    derivedCalls    // the work's outgoing calls that took a derived key ([WithDerivedKeys])

	// The work's context ([engine.handlerContext]): its end cancels it,
	// with a cause on lease loss.
	hctx lazyContext
	// The contexts of the first claim and of the first settling step
	// ([storeContext]).
	claimCtx, settleCtx lazyContext

	// The outcome record and its timestamps, built in place once the work
	// returns.
	record               recordv1.Record
	createdAt, completed timestamppb.Timestamp
}

// prepare fills in c for a call of name under policy m with the client's
// key: the store key and the fingerprint of its requests ([fingerprintOf]),
// both of the caller's scope and of m's namespace when it has one (ns,
// else name), so a renamed method keeps its keys. An error of the scope
// or the fingerprint function is a [*hookFailure]: the gRPC edge answers it
// ([engine.fail]), [Do] returns its cause wrapped.
func (e *engine) prepare(ctx context.Context, c *call, name, ns string, m *methodConfig, key string, reqs ...proto.Message) error {
	var scope string
	if e.cfg.scope != nil {
		var err error
		if scope, err = e.cfg.scope(ctx); err != nil {
			return &hookFailure{scope: true, err: err}
		}
	}
	id, kind := name, kindMethod
	if ns != "" {
		id, kind = ns, kindNamespace
	}
	fp, err := fingerprintOf(e.cfg.fingerprint, c.fpArray[:0], id, reqs)
	if err != nil {
		return &hookFailure{err: err}
	}
	c.e, c.method, c.cfg, c.fingerprint = e, name, m, fp
	c.key = storeKey(kind, id, scope, key)
	return nil
}

// run claims the key and then executes, replays or rejects the call. A
// call nested in running work that holds the same claim passes through
// under it ([engine.claimedOutside]).
func (e *engine) run(ctx context.Context, c *call) (any, error) {
	claimCtx := ctx
	switch outer, err := e.claimedOutside(ctx, c); {
	case outer != nil && err == nil:
		defer outer.nesting.leave()
		return c.t.bypass(ctx)
	case outer != nil && !errors.Is(err, errNotNested):
		return nil, err
	case outer != nil:
		// The outer work has returned, and ctx is its context, kept by a
		// goroutine: it ended with the work, not because a caller gave
		// up, so the claim's store call does not follow it, on any store
		// (a replay needs no live context). ctx still decides whether
		// anything runs (decision 97).
		claimCtx = context.WithoutCancel(ctx)
	}
	var until time.Time
	for attempt := 0; ; attempt++ {
		if e.cache != nil {
			if fp, data, ok := e.cache.get(c.key); ok {
				return e.replayCached(ctx, c, fp, data)
			}
		}
		start := time.Now()
		cl, err := e.claim(claimCtx, c)
		c.storeTime += time.Since(start)
		if err != nil {
			return e.claimFailed(ctx, c, err)
		}
		if cl.Won() {
			c.claim, c.claimedAt = Claim{StoreKey: c.key, Token: cl.Token}, start
			c.caller = ctx
			if err := ctx.Err(); err != nil {
				// The caller gave up while the claim was under way (a slow
				// store): nobody would get the answer, so don't run it.
				e.release(ctx, c, err)
				return nil, err
			}
			return e.execute(ctx, c)
		}
		if !bytes.Equal(cl.Existing.Fingerprint, c.fingerprint) {
			return nil, ErrKeyReused
		}
		if cl.Existing.State == store.StateCompleted {
			rec, resp, err := e.replay(ctx, c, cl.Existing.Data)
			if !errors.Is(err, ErrRecordCorrupt) {
				if e.cache != nil {
					e.cache.put(c.key, c.fingerprint, cl.Existing.Data, rec.GetCompletedAt(), c.cfg.retention)
				}
				e.observe(ctx, c.method, DecisionReplayed, c.storeTime, nil)
			}
			return resp, err
		}
		if e.cfg.wait <= 0 {
			return nil, ErrKeyInUse
		}
		if attempt == 0 {
			until = time.Now().Add(e.cfg.wait)
		}
		if !e.flights.wait(ctx, c.key, until, attempt) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, ErrKeyInUse
		}
	}
}

// claim claims c's key, bounded by the store timeout and the caller's
// deadline (the timer is set only when the caller's deadline is later).
func (e *engine) claim(ctx context.Context, c *call) (store.ClaimResult, error) {
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > e.cfg.storeTimeout {
		l := storeContext(&c.claimCtx, ctx, false, time.Now().Add(e.cfg.storeTimeout))
		defer l.end(nil)
		ctx = l
	}
	return e.store.Claim(ctx, c.key, c.fingerprint, c.cfg.lease)
}

// claimFailed handles a Claim error: fail closed, or fail open when
// configured and the store itself is at fault.
func (e *engine) claimFailed(ctx context.Context, c *call, err error) (any, error) {
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, store.ErrCorrupt):
		return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
	case errors.Is(err, store.ErrFull):
		return nil, fmt.Errorf("%w: %w", ErrStoreFull, err)
	case e.cfg.failOpen:
		e.observe(ctx, c.method, DecisionFailOpen, c.storeTime, err)
		return c.t.bypass(ctx)
	default:
		return nil, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
}

func (e *engine) observe(ctx context.Context, method string, d Decision, took time.Duration, err error) {
	attempt := 0
	if d == DecisionStoreError { // a store call tried once
		attempt = 1
	}
	e.cfg.observer.Observe(ctx, Event{Method: method, Decision: d, StoreTime: took, Err: err, Attempt: attempt})
}

// storeError reports one failed attempt, numbered from 1, of a store step
// that is retried; took is that attempt's time alone.
func (e *engine) storeError(ctx context.Context, method string, attempt int, took time.Duration, err error) {
	e.cfg.observer.Observe(ctx, Event{Method: method, Decision: DecisionStoreError, StoreTime: took, Err: err, Attempt: attempt})
}

// report tells the observer of a failure the engine decided (err is one
// of the library's sentinels) and returns it; own is false for any other
// error: the work's own, a replayed status, a context error.
func (e *engine) report(ctx context.Context, method string, err error, storeTime time.Duration) (f failure, own bool) {
	f, own = failureOf(err)
	if own && f.decision != 0 {
		e.observe(ctx, method, f.decision, storeTime, err)
	}
	return f, own
}
