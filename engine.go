package idempotency

import (
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
	purges  *purgeFeed   // nil without a cache, or over a store that cannot tell purges
	seal    *sealer      // nil without WithSealing
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
	if err := checkRecordLimit(s, cfg); err != nil {
		return nil, err
	}
	e := &engine{store: s, cfg: cfg, cache: newReplayCache(cfg.cache)}
	if cfg.sealing != nil {
		e.seal = newSealer(*cfg.sealing)
	}
	e.ops, e.otherOp = cfg.operations()
	return e, nil
}

// call is one keyed call on its way through the engine. It holds
// everything an execution needs, so that an executed call allocates it once
// (an entry point embeds it in its own transport value).
type call struct {
	subject     // what the observer's events name
	e           *engine
	t           transport // the entry point's side of the call
	cfg         *methodConfig
	fingerprint []byte
	fpArray     [fingerprintSize]byte // holds fingerprint when the default computes it
	isReplay    bool                  // the answer is a stored outcome
	// ownRequest: the request is the call's own ([Do]), not the outer
	// call's again (an interceptor nested in another): nested in a claim,
	// its fingerprint must be the claim's ([engine.claimedOutside]).
	// (Beside isReplay and fpArray, so that these share one word.)
	ownRequest bool
	// fromRecovery: the work's outcome is the method's RecoverFunc's
	// ([engine.recoverOutcome]), not the handler's.
	fromRecovery bool
	sealed       *callSeal // nil without sealing ([WithSealing])
	storeTime    time.Duration
	cacheGen     uint64 // the replay cache's generation when this call missed it ([replayCache.get])

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
	var fp, input []byte
	var err error
	if e.seal != nil && e.cfg.fingerprint == nil && len(reqs) == 1 {
		// A sealing server keys what the default fingerprint would hash
		// ([sealer.prepare]).
		buf := getBuffer()
		defer putBuffer(buf)
		input, err = fingerprintInput((*buf)[:0], id, reqs[0])
		*buf = input
	} else {
		fp, err = fingerprintOf(e.cfg.fingerprint, c.fpArray[:0], id, reqs)
	}
	if err != nil {
		return &hookFailure{err: err}
	}
	c.e, c.cfg, c.fingerprint = e, m, fp
	c.subject = subject{method: name, op: id, key: storeKey(kind, id, scope, key), clientKey: key}
	if e.seal != nil {
		kr, err := e.seal.keyring(ctx, scope)
		if err != nil {
			return &hookFailure{scope: true, keys: true, err: err}
		}
		c.sealed = e.seal.prepare(c.sealed, kr, scope, fp, input)
		c.fingerprint = c.sealed.keyedFP
	}
	return nil
}

// run claims the key and then executes, replays or rejects the call. A
// call nested in running work that holds the same claim passes through
// under it ([engine.claimedOutside]).
func (e *engine) run(ctx context.Context, c *call) (any, error) {
	claimCtx, resp, done, err := e.nested(ctx, c)
	if done {
		return resp, err
	}
	var until time.Time
	retake := false // claim again with the abandoned entry's fingerprint
	for attempt := 0; ; attempt++ {
		if s := c.sealed; s != nil && !retake {
			// A claim is made with the primary key's fingerprint.
			c.fingerprint, s.legacyFP = s.keyedFP, false
		}
		if e.cache != nil {
			fp, data, gen, ok := e.cache.get(c.key)
			if ok {
				return e.replayCached(ctx, c, fp, data)
			}
			c.cacheGen = gen
		}
		start := time.Now()
		cl, err := e.claim(claimCtx, c)
		c.storeTime += time.Since(start)
		if err != nil {
			return e.claimFailed(ctx, c, err)
		}
		if cl.Won() {
			return e.won(ctx, c, cl, start)
		}
		if err := e.sameRequest(c, cl.Existing.Fingerprint, cl.Existing.Data); err != nil {
			return nil, err
		}
		switch cl.Existing.State {
		case store.StateCompleted:
			return e.replayStored(ctx, c, cl.Existing.Data)
		case store.StateAbandoned:
			if !retake && e.retakes(c) {
				// Sealed under an older key: the same request, whose
				// claim takes it over with the entry's fingerprint.
				retake, attempt = true, attempt-1
				continue
			}
			// Under AbandonBlock (the claim did not take it over), or a
			// store that could not: nothing runs (decision 291).
			return nil, ErrOutcomeUnknown
		}
		if err := e.awaitInFlight(ctx, c, attempt, &until); err != nil {
			return nil, err
		}
	}
}

// nested handles a call nested in running work: when that work holds
// the same claim, the call passes through under it and done is true;
// otherwise it returns the context the claim's store call runs under.
func (e *engine) nested(ctx context.Context, c *call) (claimCtx context.Context, resp any, done bool, err error) {
	switch outer, err := e.claimedOutside(ctx, c); {
	case outer != nil && err == nil:
		defer outer.nesting.leave()
		resp, err := c.t.bypass(ctx)
		return nil, resp, true, err
	case outer != nil && !errors.Is(err, errNotNested):
		return nil, nil, true, err
	case outer != nil:
		// The outer work has returned, and ctx is its context, kept by a
		// goroutine: it ended with the work, not because a caller gave
		// up, so the claim's store call does not follow it, on any store
		// (a replay needs no live context). ctx still decides whether
		// anything runs (decision 97).
		return context.WithoutCancel(ctx), nil, false, nil
	}
	return ctx, nil, false, nil
}

// won executes the call whose claim, made at start, was won, unless the
// caller gave up while the claim was under way, or its lease ran out
// before its reply came.
func (e *engine) won(ctx context.Context, c *call, cl store.ClaimResult, start time.Time) (any, error) {
	c.claim, c.claimedAt = Claim{StoreKey: c.key, Token: cl.Token, Attempt: max(cl.Attempt, 1), Previous: cl.Previous}, start
	c.caller = ctx
	if err := ctx.Err(); err != nil {
		// The caller gave up while the claim was under way (a slow
		// store): nobody would get the answer, so don't run it. (A
		// claim taken over goes back to abandoned: [engine.release].)
		e.release(ctx, c, err)
		return nil, err
	}
	if time.Since(start) >= c.cfg.lease {
		// The lease, which the store started after start, may have run
		// out before the reply came (a stalled link): another server
		// may own the key and run its work by now, so nothing starts
		// here (decision 321). The release, fenced by the token, is
		// refused if so.
		e.release(ctx, c, errClaimLate)
		return nil, errClaimLate
	}
	if c.claim.Attempt > 1 {
		e.observeAttempt(ctx, c, DecisionTakenOver, nil)
	}
	return e.execute(ctx, c)
}

// errClaimLate is the error of a call whose claim's reply came after the
// claim's lease ran out ([engine.won]): the key may be another call's now,
// so the call fails as a duplicate of a call in flight does, and its
// client retries.
var errClaimLate = fmt.Errorf("idempotency: the claim's reply came after its lease ran out: %w: %w", ErrKeyInUse, store.ErrLeaseLost)

// replayStored replays the completed record data of c's key, and keeps
// it in the replay cache unless it is corrupt.
func (e *engine) replayStored(ctx context.Context, c *call, data []byte) (any, error) {
	rec, resp, err := e.replay(ctx, c, data)
	if !errors.Is(err, ErrRecordCorrupt) {
		if e.cache != nil {
			e.cache.put(c.key, c.fingerprint, data, rec.GetCompletedAt(), c.cfg.retention, c.cacheGen)
		}
		e.observe(ctx, &c.subject, DecisionReplayed, c.storeTime, nil)
	}
	return resp, err
}

// awaitInFlight waits, up to [WithWaitForInFlight] from the first
// attempt, for the call in flight under c's key to end, so that the
// claim is tried again; it returns [ErrKeyInUse] without a wait, or
// when the wait runs out, and the caller's error when the caller gives up.
func (e *engine) awaitInFlight(ctx context.Context, c *call, attempt int, until *time.Time) error {
	if e.cfg.wait <= 0 {
		return ErrKeyInUse
	}
	if attempt == 0 {
		*until = time.Now().Add(e.cfg.wait)
	}
	if !e.flights.wait(ctx, c.key, *until, attempt) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrKeyInUse
	}
	return nil
}

// claim claims c's key, bounded by the store timeout and the caller's
// deadline (the timer is set only when the caller's deadline is later).
func (e *engine) claim(ctx context.Context, c *call) (store.ClaimResult, error) {
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > e.cfg.storeTimeout {
		l := storeContext(&c.claimCtx, ctx, false, time.Now().Add(e.cfg.storeTimeout))
		defer l.end(nil)
		ctx = l
	}
	// A claim under a policy for abandoned claims keeps its entry, once
	// its lease has run out, as abandoned for the retention, so that a
	// claim of a crashed server is known as such; it takes an abandoned
	// entry over unless the method blocks (decisions 290, 291). Under no
	// policy (the default) it keeps nothing, writing what earlier
	// releases write, and takes over an entry that a server with a policy
	// abandoned, as re-run does.
	opts := store.ClaimOptions{TakeOver: c.cfg.abandoned != AbandonBlock}
	if c.cfg.abandoned != AbandonUnset {
		opts.Keep = c.cfg.retention
	}
	return e.store.Claim(ctx, c.key, c.fingerprint, c.cfg.lease, opts)
}

// kept reports whether c claims under a policy for abandoned claims, so
// that its entry outlives its lease as abandoned ([engine.claim]).
func (c *call) kept() bool { return c.cfg.abandoned != AbandonUnset }

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
		e.observe(ctx, &c.subject, DecisionFailOpen, c.storeTime, err)
		return c.t.bypass(ctx)
	default:
		return nil, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
}

// subject is what an [Event] names besides its decision: the call's
// method (or operation), its operation, and its keys once they are known.
type subject struct {
	method    string // full method name, or the operation of Do and Once
	op        string // the method's namespace, the operation, or the method
	key       string // hashed store key; "" before the client's key is read
	clientKey string // the client's key, with key
}

// methodSubject is the subject of a decision about a call of name under
// policy m made before its key was read.
func methodSubject(name string, m *methodConfig) *subject {
	op := name
	if m != nil && m.namespace != "" {
		op = m.namespace
	}
	return &subject{method: name, op: op}
}

// event returns the event of decision d about s.
func (s *subject) event(d Decision, took time.Duration, err error) Event {
	return Event{Method: s.method, Operation: s.op, StoreKey: s.key, Key: s.clientKey, Decision: d, StoreTime: took, Err: err}
}

func (e *engine) observe(ctx context.Context, s *subject, d Decision, took time.Duration, err error) {
	ev := s.event(d, took, err)
	if d == DecisionStoreError { // a store call tried once
		ev.Attempt = 1
	}
	e.cfg.observer.Observe(ctx, ev)
}

// observeAttempt reports decision d about c's claim, whose attempt
// ([Claim.Attempt]) the event carries.
func (e *engine) observeAttempt(ctx context.Context, c *call, d Decision, err error) {
	ev := c.subject.event(d, c.storeTime, err)
	ev.Attempt = c.claim.Attempt
	e.cfg.observer.Observe(ctx, ev)
}

// storeError reports one failed attempt, numbered from 1, of a store step
// that is retried; took is that attempt's time alone.
func (e *engine) storeError(ctx context.Context, s *subject, attempt int, took time.Duration, err error) {
	ev := s.event(DecisionStoreError, took, err)
	ev.Attempt = attempt
	e.cfg.observer.Observe(ctx, ev)
}

// report tells the observer of a failure the engine decided (err is one
// of the library's sentinels) and returns it; own is false for any other
// error: the work's own, a replayed status, a context error.
func (e *engine) report(ctx context.Context, s *subject, err error, storeTime time.Duration) (f failure, own bool) {
	f, own = failureOf(err)
	if own && f.decision != 0 {
		e.observe(ctx, s, f.decision, storeTime, err)
	}
	return f, own
}
