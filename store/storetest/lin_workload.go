package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/grpc-idempotency/idempotency/store"
)

// linScript makes the same calls on every run, one at a time and without
// faults, on keys of its own: the steps whose wrong answers the store's
// classic bugs give (a claim that overwrites, a release, completion or
// extension that ignores the token, a take-over that keeps the abandoned
// owner, a purge past its fence). They are recorded with the rest, so that
// such a bug fails every run, not only the runs where a race falls its way.
// a and b are two instances over the same backend (or the same one).
func linScript(ctx context.Context, rec *linRecorder, prefix string, a, b store.Store) {
	call := func(s store.Store, in linInput) linOutput { return rec.call(ctx, 0, s, in) }
	claim := func(s store.Store, key string, fp int, keep, takeOver bool) string {
		return call(s, linInput{op: opClaim, key: key, fp: fp, keep: keep, takeOver: takeOver}).token
	}
	owned := func(s store.Store, op linOp, key, token string) {
		call(s, linInput{op: op, key: key, token: token, data: "script " + key})
	}
	lookup := func(s store.Store, key string) { call(s, linInput{op: opLookup, key: key}) }

	// A claim of a key in flight, then of a completed key, finds it.
	k := prefix + "script-claim"
	first := claim(a, k, 0, false, false)
	claim(b, k, 0, false, false)
	owned(a, opComplete, k, first)
	claim(b, k, 1, false, false)
	owned(b, opRelease, k, first)
	lookup(b, k)

	// A stale owner can neither release, complete, extend nor abandon the
	// next owner's claim.
	k = prefix + "script-stale"
	stale := claim(a, k, 0, true, false)
	owned(a, opRelease, k, stale)
	next := claim(b, k, 1, true, false)
	for _, op := range []linOp{opRelease, opComplete, opExtend, opAbandon} {
		owned(a, op, k, stale)
	}
	lookup(a, k)
	owned(b, opComplete, k, next)
	lookup(a, k)

	// An abandoned claim is taken over by its fingerprint only, and the
	// take-over fences the abandoned owner.
	k = prefix + "script-abandoned"
	gone := claim(a, k, 0, true, false)
	owned(a, opAbandon, k, gone)
	claim(b, k, 1, true, true)
	taker := claim(b, k, 0, true, true)
	owned(a, opComplete, k, gone)
	owned(a, opExtend, k, gone)
	lookup(a, k)
	owned(b, opComplete, k, taker)
	lookup(a, k)

	// A purge keeps to its fence.
	k = prefix + "script-purge"
	purged := claim(a, k, 0, false, false)
	call(b, linInput{op: opPurge, key: k})
	call(b, linInput{op: opPurge, key: k, inFlight: true, token: purged})
	owned(a, opComplete, k, purged)
	again := claim(a, k, 0, false, false)
	call(b, linInput{op: opPurge, key: k, inFlight: true, token: purged})
	owned(a, opComplete, k, again)
	call(b, linInput{op: opPurge, key: k, inFlight: true})
	call(b, linInput{op: opPurge, key: k, token: again})
	lookup(a, k)
}

// linTokens are the tokens every client has seen, for calls with another
// client's token or a stale one.
type linTokens struct {
	mu     sync.Mutex
	tokens []string
}

func (p *linTokens) add(token string) {
	if token == "" {
		return
	}
	p.mu.Lock()
	p.tokens = append(p.tokens, token)
	p.mu.Unlock()
}

func (p *linTokens) pick(rng *rand.Rand) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tokens) == 0 {
		return "storetest: nobody's token"
	}
	return p.tokens[rng.IntN(len(p.tokens))]
}

// linClient makes random calls on a few keys shared with the other
// clients.
type linClient struct {
	id   int
	rng  *rand.Rand
	s    store.Store
	rec  *linRecorder
	pool *linTokens
	keys []string
	// held is, by key, the token of this client's latest won claim, and
	// fences the Info.Token of its latest look at the key.
	held, fences map[string]string
	noPurge      bool // LinearizabilityConfig.WithoutPurges
	failover     bool // LinearizabilityConfig.Failover
	// open is, with Failover, the key of this client's latest won claim
	// until it completes it: its completions and extensions go there
	// three times in four, as a handler's would, since no release frees
	// keys for more claims.
	open string
	n    int
}

// run makes n calls, or, when until is not nil, calls until it is
// closed.
func (c *linClient) run(ctx context.Context, n int, until <-chan struct{}) {
	for i := 0; until != nil || i < n; i++ {
		if ctx.Err() != nil {
			return
		}
		if until != nil {
			select {
			case <-until:
				return
			default:
			}
		}
		c.step(ctx)
	}
}

// linMix is how often step makes each call, in percent: a call's share
// is its bound less the one before it, and the rest are lookups.
// linFailoverMix is the mix of LinearizabilityConfig.Failover: claims,
// completions and extensions, the steps whose writes replicas
// acknowledge (or whose loss the model cannot see: nothing expires).
var (
	linMix         = []linShare{{opClaim, 30}, {opComplete, 48}, {opRelease, 56}, {opExtend, 64}, {opAbandon, 72}, {opPurge, 80}}
	linFailoverMix = []linShare{{opClaim, 40}, {opComplete, 75}, {opExtend, 82}}
)

// linShare is an operation of a mix, and the bound of its share.
type linShare struct {
	op   linOp
	upTo int
}

// pick picks the operation of the next call.
func (c *linClient) pick() linOp {
	r, mix := c.rng.IntN(100), linMix
	if c.failover {
		mix = linFailoverMix
	}
	for _, m := range mix {
		switch {
		case r >= m.upTo:
		case m.op == opPurge && c.noPurge:
			return opLookup
		default:
			return m.op
		}
	}
	return opLookup
}

// step makes one random call: claims and looks most, and uses its own
// token three times in four.
func (c *linClient) step(ctx context.Context) {
	c.n++
	key := c.keys[c.rng.IntN(len(c.keys))]
	token := c.held[key]
	if token == "" || c.rng.IntN(4) == 0 {
		token = c.pool.pick(c.rng)
	}
	in := linInput{op: c.pick(), key: key, token: token}
	if c.open != "" && (in.op == opComplete || in.op == opExtend) && c.rng.IntN(4) != 0 {
		in.key, in.token = c.open, c.held[c.open]
	}
	switch in.op {
	case opClaim:
		in = linInput{op: opClaim, key: key, fp: c.rng.IntN(2), keep: c.rng.IntN(2) == 0, takeOver: c.rng.IntN(2) == 0}
	case opComplete:
		in.data = fmt.Sprintf("client %d call %d", c.id, c.n)
	case opPurge:
		in.inFlight = c.rng.IntN(2) == 0
		switch c.rng.IntN(3) {
		case 0:
			in.token = ""
		case 1:
			in.token = c.fences[key]
		}
	case opLookup:
		in.token = ""
	}
	out := c.rec.call(ctx, c.id, c.s, in)
	if out.token != "" {
		c.held[key] = out.token
		if c.failover {
			c.open = key
		}
	}
	if in.op == opComplete && in.key == c.open && !out.unknown && out.err == errNone {
		c.open = ""
	}
	if out.infoToken != "" {
		c.fences[key] = out.infoToken
	}
	c.pool.add(out.token)
}
