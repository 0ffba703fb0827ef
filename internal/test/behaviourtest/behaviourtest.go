// Package behaviourtest is the behaviour contract of docs/semantics/README.md as
// one table, run against every entry point of the library: the unary
// server interceptor (over bufconn), [idempotency.Do], [idempotency.Once]
// and the net/http middleware (over httptest), and those of modules of
// their own, which pass their [EntryPoint]s with [WithEntryPoints] (the
// connect-go interceptor, in connectidempotency/internal/connecttest). Each situation (new key,
// replay, in flight, reused key, errors, panic, caller leaving, lease
// lost, store down or full, outcome too large) states what every entry
// point answers, in the small common terms of [Result]; an entry point
// that answers otherwise fails its subtest, so a new entry point, added
// to the list here, cannot drift from the others.
//
// [Run] takes the store to test on, as store/storetest does: the root
// package runs it on the memory store, the integration module on Redis
// and PostgreSQL. Faults are injected by wrapping that real store in
// internal/test/faultstore; nothing is faked.
package behaviourtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
)

// kind names the answers of an entry point: those of a gRPC server
// (unary, and every [EntryPoint] of another module), of [idempotency.Do],
// of [idempotency.Once], or of the net/http middleware.
type kind int

const (
	unary kind = iota
	do
	once
	httpMiddleware
)

// Caller makes one call through an entry point: with key, the request
// variant req (0 or 1: two requests with different fingerprints, see
// [Request]), and id, the call's id, which reaches the work the call runs
// ([Env.Work]).
type Caller interface {
	Call(ctx context.Context, key string, req int, id string) Result
}

// EntryPoint is an entry point the table runs against. Those of modules
// of their own are passed with [WithEntryPoints]; they answer as a gRPC
// server does (the status code, the ErrorInfo reason, RetryInfo with the
// pushback trailer, the replay marker), so the table's gRPC answers are
// theirs.
type EntryPoint struct {
	// Name names the entry point's subtests (Situation/Name).
	Name string
	// New builds the entry point over e, for one situation; it registers
	// any cleanup with t.Cleanup.
	New  func(t *testing.T, e *Env) Caller
	kind kind
}

// Env is what an entry point is built over, for one situation.
type Env struct {
	// Store is the situation's store, with its faults.
	Store *faultstore.Store
	// Opts are the situation's server options.
	Opts []idempotency.ServerOption
	// Left is called with a call's id when the entry point sees its
	// caller's context end (the server's side of the call).
	Left func(id string)
	work *work
}

// entryPoints lists the library's own entry points.
var entryPoints = []EntryPoint{
	{Name: "Unary", New: newUnary, kind: unary},
	{Name: "Do", New: newDo, kind: do},
	{Name: "Once", New: newOnce, kind: once},
	{Name: "HTTP", New: newHTTP, kind: httpMiddleware},
}

// DefaultLease is the short lease of the situation where the store loses
// a claim while its work runs: it is renewed every third of it.
const DefaultLease = 300 * time.Millisecond

// Option configures [Run].
type Option func(*config)

type config struct {
	lease       time.Duration
	entryPoints []EntryPoint
}

// WithLease sets the short lease of [DefaultLease]; raise it for a store
// whose round trips are slow. A value under 100 ms keeps the default.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d >= 100*time.Millisecond {
			c.lease = d
		}
	}
}

// WithEntryPoints runs the situations against eps, the entry points of a
// module of its own, instead of the library's own.
func WithEntryPoints(eps ...EntryPoint) Option {
	return func(c *config) {
		for _, ep := range eps {
			ep.kind = unary // a gRPC server's answers
			c.entryPoints = append(c.entryPoints, ep)
		}
	}
}

// Run runs every situation against every entry point, each as a parallel
// subtest named situation/entry point (for example InFlight/HTTP) over a
// store newStore returns; newStore registers any cleanup with t.Cleanup.
// Stores may be shared between subtests: each uses keys of its own.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts ...Option) {
	t.Helper()
	cfg := config{lease: DefaultLease}
	for _, o := range opts {
		o(&cfg)
	}
	eps := cfg.entryPoints
	if eps == nil {
		eps = entryPoints
	}
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, s := range situations(cfg) {
		t.Run(s.name, func(t *testing.T) {
			for _, ep := range eps {
				if s.skip[ep.kind] != "" {
					continue
				}
				t.Run(ep.Name, func(t *testing.T) {
					t.Parallel()
					p := newPlayer(t, s, ep.kind, newStore(t))
					p.ep = ep.New(t, p.env)
					// Cleanups run last first: the gate opens before the
					// entry point's server stops, so nothing stays blocked
					// when a step fails.
					t.Cleanup(p.open)
					p.key = s.name + "-" + ep.Name + "-" + nonce
					if s.key != "" {
						p.key = s.key
					}
					p.play()
				})
			}
		})
	}
}

// player plays one situation's steps against one entry point.
type player struct {
	t    *testing.T
	s    situation
	kind kind
	ep   Caller
	env  *Env
	key  string

	calls   []chan Result // of every call, by number - 1
	cancels []context.CancelFunc
	answers [][]byte

	mu   sync.Mutex
	gone map[string]chan struct{} // call id -> closed when the entry point saw it leave

	openGate sync.Once
}

func newPlayer(t *testing.T, s situation, k kind, st store.Store) *player {
	fs := faultstore.New(st)
	fs.Down.Store(s.down)
	fs.Full.Store(s.full)
	fs.CorruptData.Store(s.corrupt)
	p := &player{t: t, s: s, kind: k, gone: map[string]chan struct{}{}}
	p.env = &Env{Store: fs, Opts: s.opts, work: newWork(s.script), Left: func(id string) { close(p.left(id)) }}
	return p
}

// left returns the channel closed when call id's caller has left.
func (p *player) left(id string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.gone[id]
	if !ok {
		ch = make(chan struct{})
		p.gone[id] = ch
	}
	return ch
}

func (p *player) open() { p.openGate.Do(func() { close(p.env.work.gate) }) }

// await waits for ch, failing the test after a while: a step's event that
// never comes is a failure, not a hang.
func await[T any](p *player, ch <-chan T, what string) T {
	p.t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		p.t.Fatalf("step: %s did not happen within 10s", what)
		panic("unreachable")
	}
}

func (p *player) play() {
	t := p.t
	for i, st := range p.s.steps {
		switch st.op {
		case opCall, opStart:
			ctx, cancel := context.WithCancel(t.Context())
			n := len(p.calls) + 1
			ch := make(chan Result, 1)
			p.calls, p.cancels = append(p.calls, ch), append(p.cancels, cancel)
			p.answers = append(p.answers, nil)
			id := "call-" + strconv.Itoa(n)
			go func() { ch <- p.result(ctx, st.req, id) }()
			if st.op == opCall {
				p.check(n, await(p, ch, fmt.Sprintf("call %d", n)), st.want)
				cancel()
			}
		case opFinish:
			p.check(st.n, await(p, p.calls[st.n-1], fmt.Sprintf("the end of call %d", st.n)), st.want)
			p.cancels[st.n-1]()
		case opAwaitRun:
			for got := 0; got < st.n; {
				got = await(p, p.env.work.started, fmt.Sprintf("execution %d", st.n))
			}
		case opAwaitClaims:
			wait.For(t, func() bool { return p.env.Store.Count("claim") >= st.n })
		case opAwaitSettled:
			wait.For(t, func() bool { return p.env.Store.Count("complete")+p.env.Store.Count("release") >= st.n })
		case opOpen:
			p.open()
		case opLeave:
			p.cancels[st.n-1]()
			await(p, p.left("call-"+strconv.Itoa(st.n)), fmt.Sprintf("call %d leaving", st.n))
		case opEvict:
			if n, err := p.env.Store.Evict(t.Context()); n != 1 || err != nil {
				t.Fatalf("step %d: evicted %d claims (%v), want 1", i+1, n, err)
			}
		}
	}
	runs, causes := p.env.work.executions()
	if runs != p.s.runs {
		t.Errorf("the work ran %d times, want %d", runs, p.s.runs)
	}
	for i, c := range causes {
		want := p.s.lost == i+1
		if ok := want && errors.Is(c, store.ErrLeaseLost) || !want && c == nil; !ok {
			t.Errorf("execution %d answered with its context ended by %v; want lease lost: %v", i+1, c, want)
		}
	}
}

// result makes one call and completes what only the harness knows.
func (p *player) result(ctx context.Context, req int, id string) Result {
	r := p.ep.Call(ctx, p.key, req, id)
	ran := p.env.work.ran(id)
	if r.ranKnown && r.Ran != ran {
		p.t.Errorf("%s: the entry point reports ran=%v, the work ran=%v", id, r.Ran, ran)
	}
	r.Ran = ran
	return r
}

func (p *player) check(n int, got Result, w want) {
	p.t.Helper()
	p.answers[n-1] = got.Answer
	if d := w.diff(p.kind, got, p.answers); d != "" {
		p.t.Errorf("call %d:%s", n, d)
	}
}
