package idempotency_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// The harness of the chaos soaks (TestChaosSoak, TestChaosSoakStreams):
// two server instances' stores over one redis-server, each behind its own
// fault proxy; a chaos goroutine that cuts a set of proxies' connections
// at random; callers that run numbered calls and tally how each ended; a
// per-key count of handler runs; and the healing of given-up calls once
// the faults stop.

// soakLease is the lease of the soaks' servers.
const soakLease = 500 * time.Millisecond

// soakInstance is one server instance's store: a redisstore on its own
// go-redis client, connected through its own fault proxy to the shared
// redis-server, and the counts of what its observer saw.
type soakInstance struct {
	proxy    *faultproxy.Proxy
	store    *redisstore.Store
	observed events
}

// newSoakInstances starts a redis-server and the stores of two instances
// over it.
func newSoakInstances(t *testing.T, ctx context.Context) [2]*soakInstance {
	t.Helper()
	rs := redistest.StartServer(t)
	var insts [2]*soakInstance
	for i := range insts {
		p := chaosProxy(t, rs.Addr())
		st := redisstore.New(chaosRedis(t, p.Addr(), true))
		if err := st.LoadScripts(ctx); err != nil {
			t.Fatal(err)
		}
		insts[i] = &soakInstance{proxy: p, store: st}
	}
	return insts
}

// options returns the soaks' server options, observed by the instance.
func (in *soakInstance) options() []idempotency.ServerOption {
	return []idempotency.ServerOption{
		idempotency.WithLease(soakLease),
		idempotency.WithRetryAfter(25 * time.Millisecond),
		idempotency.WithStoreTimeout(2 * time.Second),
		idempotency.WithObserver(&in.observed),
	}
}

// storeProxies returns the instances' store proxies.
func storeProxies(insts [2]*soakInstance) []*faultproxy.Proxy {
	return []*faultproxy.Proxy{insts[0].proxy, insts[1].proxy}
}

// chaos cuts the connections of its proxies at random until stopped:
// after a pause of 1 ms up to 1 ms + maxPause, on a random proxy, every
// live connection at once (one time in four), or else one connection
// mid-reply (the request reached the server, its reply is lost).
type chaos struct {
	proxies             []*faultproxy.Proxy
	stop                chan struct{}
	wg                  sync.WaitGroup
	cutAlls, cutReplies atomic.Int64
}

// Whether a chaos leaves alone a proxy with no live connection, rather
// than arm a cut of the next one's first reply. gRPC links need it: a
// connection cut while it is set up is a failed dial, which grpc-go
// retries after a backoff, and cuts armed at each attempt would keep a
// client from ever connecting.
const (
	cutNewLinks   = false
	liveLinksOnly = true
)

func startChaos(maxPause time.Duration, liveOnly bool, proxies ...*faultproxy.Proxy) *chaos {
	c := &chaos{proxies: proxies, stop: make(chan struct{})}
	c.wg.Go(func() {
		for {
			tm := time.NewTimer(time.Millisecond + rand.N(maxPause))
			select {
			case <-c.stop:
				tm.Stop()
				return
			case <-tm.C:
			}
			p := proxies[rand.IntN(len(proxies))]
			switch {
			case liveOnly && p.Conns() == 0:
			case rand.IntN(4) == 0:
				p.CutAll()
				c.cutAlls.Add(1)
			case p.ArmedCuts() == 0:
				// Armed cuts would pile up whenever fewer replies flow
				// than cuts are armed (round trips are shared), and then
				// drop every reply: arm the next once the last is spent.
				p.CutNextReply(1)
				c.cutReplies.Add(1)
			}
		}
	})
	return c
}

// Stop stops the cuts and waits for the goroutine.
func (c *chaos) Stop() {
	close(c.stop)
	c.wg.Wait()
}

// String says what the chaos did, for logs.
func (c *chaos) String() string {
	var cut, accepted []int64
	for _, p := range c.proxies {
		cut, accepted = append(cut, p.Cuts()), append(accepted, p.Accepted())
	}
	return fmt.Sprintf("%d cut-all events, %d mid-reply cuts armed; connections cut %v, accepted %v",
		c.cutAlls.Load(), c.cutReplies.Load(), cut, accepted)
}

// cuts is how many connections the chaos's proxies cut.
func (c *chaos) cuts() int64 {
	var n int64
	for _, p := range c.proxies {
		n += p.Cuts()
	}
	return n
}

// executions counts, per key, the handler runs that completed.
type executions struct{ m sync.Map } // key -> *atomic.Int64

// add counts a run of key's handler and returns its number.
func (e *executions) add(key string) int64 {
	c, _ := e.m.LoadOrStore(key, new(atomic.Int64))
	return c.(*atomic.Int64).Add(1)
}

// doubles returns how many keys ran more than once, and reports the first
// ten as errors, with what the instances observed of them. A key in lost
// may run again (its claim was lost while a run held it: decision 9):
// those are counted in rerun and logged, not reported as errors.
func (e *executions) doubles(t *testing.T, insts [2]*soakInstance, lost map[string]bool) (doubles, rerun int) {
	t.Helper()
	e.m.Range(func(k, v any) bool {
		n := v.(*atomic.Int64).Load()
		switch {
		case n <= 1:
		case lost[k.(string)]:
			rerun++
			t.Logf("key %s executed %d times, after its claim was lost (lease_lost)", k, n)
		default:
			doubles++
			if doubles <= 10 {
				t.Errorf("key %s executed %d times; %s", k, n, keyHistory(insts, k.(string)))
			}
		}
		return true
	})
	return doubles, rerun
}

// once returns how many keys ran exactly once, or, for a key in lost,
// at least once, and logs what each instance observed of the first ten
// others.
func (e *executions) once(t *testing.T, insts [2]*soakInstance, lost map[string]bool) int {
	t.Helper()
	n, others := 0, 0
	e.m.Range(func(k, v any) bool {
		if c := v.(*atomic.Int64).Load(); c == 1 || c > 1 && lost[k.(string)] {
			n++
		} else if others++; others <= 10 {
			t.Logf("key %s executed %d times; %s", k, c, keyHistory(insts, k.(string)))
		}
		return true
	})
	return n
}

// keyHistory lists, per instance, the decisions its observer saw for the
// client key, in order, with their attempt numbers and errors, for logs.
func keyHistory(insts [2]*soakInstance, key string) string {
	var b strings.Builder
	for i, in := range insts {
		fmt.Fprintf(&b, "instance %c:", 'A'+i)
		for _, ev := range in.observed.All() {
			if ev.Key != key {
				continue
			}
			fmt.Fprintf(&b, " %v", ev.Decision)
			if ev.Attempt > 0 {
				fmt.Fprintf(&b, "#%d", ev.Attempt)
			}
			if ev.Err != nil {
				fmt.Fprintf(&b, "(%v)", ev.Err)
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}

// leaseLostKeys returns the client keys whose claim an instance's observer
// saw lost (lease_lost): the store could not be reached to renew or settle
// it for longer than its lease, and another instance may have taken the
// key over, so a retry may run it again (decision 9). This is the one
// second execution the soaks allow.
func leaseLostKeys(insts [2]*soakInstance) map[string]bool {
	lost := map[string]bool{}
	for _, in := range insts {
		for _, ev := range in.observed.All() {
			if ev.Decision == idempotency.DecisionLeaseLost {
				lost[ev.Key] = true
			}
		}
	}
	return lost
}

// The kinds of [soakProblem].
const (
	problemWrong   = "wrong"
	problemMissing = "missing or repeated"
)

// soakProblem is an answer that is not the call's own; kind names what is
// wrong with it (problemWrong, problemMissing). call is the call's
// number, set by runSoak. acrossRuns marks a stream that went on with
// another run's messages after a cut: allowed only for a key whose claim
// was lost ([soakTally.excuse]).
type soakProblem struct {
	kind, detail string
	call         int
	acrossRuns   bool
}

// soakGiveUp is a call that ended with a retryable error: the client ran
// out of attempts.
type soakGiveUp struct {
	i   int
	err error
}

// soakBudget is how long a soak starts calls for: a soak stops at its
// count of calls or at its budget, whichever comes first, so a loaded
// machine makes it shorter, never wrong. The calls started by then run to
// their end, and every check counts those.
const soakBudget = 45 * time.Second

// soakDeadline bounds a whole soak (its calls, then their healing): it only
// stops a soak that hangs, well after soakBudget.
const soakDeadline = 4 * time.Minute

// soakTally is how the calls of a soak ended.
type soakTally struct {
	calls    int // the calls started: 0 to calls-1
	elapsed  time.Duration
	answers  int
	gaveUp   []soakGiveUp
	problems []soakProblem
}

// runSoak runs calls 0 to calls-1 from callers goroutines, starting none
// after budget has passed, and tallies how each started call ended: call
// returns a problem when the answer was not its own, else the call's
// error: nil for an answer, a retryable one for a give-up, any other a
// problem.
func runSoak(calls, callers int, budget time.Duration, call func(i int) (*soakProblem, error)) *soakTally {
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		tl   soakTally
	)
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for time.Since(start) < budget {
				i := int(next.Add(1) - 1)
				if i >= calls {
					return
				}
				p, err := call(i)
				mu.Lock()
				switch {
				case p != nil:
					p.call = i
					tl.problems = append(tl.problems, *p)
				case err == nil:
					tl.answers++
				case retryableGiveUp(err):
					tl.gaveUp = append(tl.gaveUp, soakGiveUp{i, err})
				default:
					tl.problems = append(tl.problems, soakProblem{kind: problemWrong, detail: fmt.Sprintf("call %d: %v is neither an answer nor a retryable error", i, err), call: i})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	tl.elapsed = time.Since(start)
	tl.calls = min(int(next.Load()), calls)
	return &tl
}

// report reports the first ten problems as errors, each with what the
// instances observed of its call's key (keyOf), and checks that every
// call started ended.
func (tl *soakTally) report(t *testing.T, insts [2]*soakInstance, keyOf func(i int) string) {
	t.Helper()
	for _, p := range tl.problems[:min(len(tl.problems), 10)] {
		t.Errorf("%s: %s; %s", p.kind, p.detail, keyHistory(insts, keyOf(p.call)))
	}
	if got := tl.answers + len(tl.gaveUp) + len(tl.problems); got != tl.calls {
		t.Fatalf("%d calls ended, want %d", got, tl.calls)
	}
}

// excuse takes out of the problems each stream that went on with another
// run's messages after a cut, when its key (keyOf) is in lost: a run whose
// claim was lost may be followed by another, and a resumed stream gets the
// later run's messages after those it has (decisions 9 and 86). It counts
// them as answers and logs them.
func (tl *soakTally) excuse(t *testing.T, lost map[string]bool, keyOf func(i int) string) {
	t.Helper()
	kept, excused := tl.problems[:0], 0
	for _, p := range tl.problems {
		if p.acrossRuns && lost[keyOf(p.call)] {
			excused++
			t.Logf("after a lost claim: %s", p.detail)
			continue
		}
		kept = append(kept, p)
	}
	tl.problems, tl.answers = kept, tl.answers+excused
}

// count returns how many problems are of kind.
func (tl *soakTally) count(kind string) int {
	n := 0
	for _, p := range tl.problems {
		if p.kind == kind {
			n++
		}
	}
	return n
}

// giveUps counts the give-ups by code and reason, for logs.
func (tl *soakTally) giveUps() map[string]int {
	by := map[string]int{}
	for _, g := range tl.gaveUp {
		by[status.Code(g.err).String()+"/"+clientReason(g.err)]++
	}
	return by
}

// heal retries each given-up call with call, from callers goroutines, once
// the faults are over, and returns the first failure: each must now end
// with its answer.
func (tl *soakTally) heal(callers int, call func(i int) error) error {
	work := make(chan int)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed error
	)
	for range callers {
		wg.Go(func() {
			for i := range work {
				if err := call(i); err != nil {
					mu.Lock()
					if failed == nil {
						failed = fmt.Errorf("retrying given-up call %d after the faults: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, g := range tl.gaveUp {
		work <- g.i
	}
	close(work)
	wg.Wait()
	return failed
}

// retryableGiveUp reports whether err is one the client retries, so a call
// ending with it ran out of attempts.
func retryableGiveUp(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.Aborted:
		return clientReason(err) == idempotency.ErrKeyInUse.Reason
	}
	return false
}
