package storetest

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grpc-idempotency/idempotency/store"
)

// Environment of [RunLinearizability].
const (
	// LinearizabilityOutEnv names the directory a failed check writes its
	// visualization to (an HTML page, named after the test); the system's
	// temporary directory when it is unset.
	LinearizabilityOutEnv = "STORETEST_LINEARIZABILITY_OUT"
	// LinearizabilityReportEnv names a file each check appends one line
	// to: the test, the operations and keys it checked, and its verdict.
	LinearizabilityReportEnv = "STORETEST_LINEARIZABILITY_REPORT"
)

// LinearizabilityConfig configures [RunLinearizability]. Zero fields take
// their defaults.
type LinearizabilityConfig struct {
	// Stores are the instances the clients call, spread over them in
	// turn: several instances over one backend (each with connections of
	// its own) show what one instance alone cannot. At least one; each
	// must implement store.Inspector.
	Stores []store.Store
	// Faults inject faults between the stores and their backend (drop a
	// reply, add latency, cut every connection): while the clients run,
	// one picked at random is called every FaultEvery. With none, every
	// call must return one of the contract's answers, and an error that is
	// not one fails the run.
	Faults []func()
	// Heal ends every fault, once the clients are done; nil when there is
	// nothing to end.
	Heal func()
	// FaultEvery is the time between two faults. Default 25ms.
	FaultEvery time.Duration
	// Clients is how many goroutines call at once. Default 8.
	Clients int
	// Operations is how many calls each client makes. Default 150.
	Operations int
	// Keys is how many keys the clients share. Default 6.
	Keys int
	// CallTimeout bounds each call; a call that runs out is
	// indeterminate. Default 3s.
	CallTimeout time.Duration
	// CheckTimeout bounds the check of the history. Default 1m.
	CheckTimeout time.Duration
	// Fences is for a store whose Info.Token is a fence made per call, so
	// that two calls may name one entry with two tokens (migratestore):
	// the check then compares no Info.Token, and lets a purge fenced by
	// any token have found it the entry's or not.
	Fences bool
	// TokensPerInstance is for a store whose owner tokens own nothing on
	// another instance (migratestore seals its tokens with a key of its
	// instance): each call then gives a token back only to the instance
	// that issued it, as the interceptor does.
	TokensPerInstance bool
	// WithoutPurges leaves Purge out of the random calls (the script
	// still purges, one call at a time): for a store whose Purge is not
	// one atomic step against a concurrent Claim (migratestore looks at
	// two stores in turn, and may refuse a purge with store.ErrChanged
	// while a claim is between them).
	WithoutPurges bool
	// OnKeys, when set, is called with the keys of the random calls
	// before they begin, for faults aimed at them (moving their slots in
	// a Redis Cluster).
	OnKeys func(keys []string)
	// Until, when set, ends the random calls once it is closed, in place
	// of Operations: for faults that take their time (a failover), so
	// that the faults decide how long the clients call before, between
	// and after them.
	Until <-chan struct{}
	// Failover is for a backend that fails over, while the clients run,
	// to a replica that holds every acknowledged claim and completion but
	// perhaps not the rest (a Redis master under Sentinel, with
	// redisstore.WithMinReplicas): what the check holds the store to is
	// then that promise. The random calls make no release, abandon or
	// purge, whose writes no replica acknowledges and a failover may
	// lose; and a completion whose call failed may be lost at any time
	// after it took effect, even after other calls saw it, until an
	// acknowledged Complete of its owner confirms it (a claim whose call
	// failed may already be undone: its release). A claim or completion
	// acknowledged, and lost, fails the check.
	Failover bool
	// WantIllegal turns the verdict round, for a test that shows the
	// check catches a backend that breaks the promise checked (a
	// failover that loses an acknowledged claim): the test fails when
	// the history is linearizable, and logs the drawing's page when it
	// is not. Its line in the report (LinearizabilityReportEnv) ends
	// "NOT linearizable, as wanted".
	WantIllegal bool
}

func (c LinearizabilityConfig) withDefaults() LinearizabilityConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Clients, 8)
	def(&c.Operations, 150)
	def(&c.Keys, 6)
	defDur(&c.FaultEvery, 25*time.Millisecond)
	defDur(&c.CallTimeout, 3*time.Second)
	defDur(&c.CheckTimeout, time.Minute)
	return c
}

// RunLinearizability records a history of concurrent calls on the stores
// and checks it with Porcupine against a sequential model of one key's
// entry: claim (with its keep and take-over), complete, release, extend,
// abandon, purge and lookup, owner tokens and Info.Token. The history
// begins with a fixed script of calls made one at a time, without faults,
// whose wrong answers the classic bugs give; then Clients goroutines make
// random calls on a few shared keys, while Faults are injected; then,
// faults healed, one lookup of every key. A call that failed with
// anything but one of the contract's errors is indeterminate, as Jepsen
// calls it: the model lets it have taken effect at any time after it was
// made, or never. Leases, keeps and retentions are an hour, so nothing
// runs out meanwhile: expiry is the conformance suite's to test.
//
// A history that is not linearizable fails the test, which names the
// HTML page where Porcupine draws it (see [LinearizabilityOutEnv]).
func RunLinearizability(t *testing.T, cfg LinearizabilityConfig) {
	t.Helper()
	res := checkLinearizability(t, cfg, os.Getenv(LinearizabilityOutEnv))
	illegal, verdict := res.result == porcupine.Illegal || res.reusedToken != "", res.verdict
	switch {
	case !cfg.WantIllegal:
	case illegal:
		verdict += ", as wanted"
	default:
		verdict += ", but one that is not was wanted"
	}
	line := fmt.Sprintf("linearizability: %T, %s: %d operations (%d indeterminate) on %d keys: %s",
		cfg.Stores[0], t.Name(), res.operations, res.unknowns, res.keys, verdict)
	t.Log(line)
	if path := os.Getenv(LinearizabilityReportEnv); path != "" {
		if err := appendLine(path, line); err != nil {
			t.Errorf("write the report: %v", err)
		}
	}
	if cfg.WantIllegal {
		if !illegal {
			t.Errorf("the history was found %s; want a history that is not linearizable", res.verdict)
			return
		}
		t.Logf("as wanted, the history is not linearizable: see %s; the calls on the first key found so:\n%s", res.page, res.illegalKey)
		return
	}
	switch {
	case res.result == porcupine.Illegal:
		t.Errorf("the history is not linearizable: see %s; the calls on the first key found so:\n%s", res.page, res.illegalKey)
	case res.reusedToken != "":
		t.Errorf("two won claims returned the owner token %q: a token must be fresh", res.reusedToken)
	case res.result == porcupine.Unknown:
		t.Errorf("the check did not finish within %v", cfg.withDefaults().CheckTimeout)
	case len(cfg.Faults) == 0 && res.unknowns > 0:
		t.Errorf("%d calls failed with no fault injected; the first: %s", res.unknowns, res.firstCause)
	}
}

// linResult is what checkLinearizability found.
type linResult struct {
	result                     porcupine.CheckResult
	verdict                    string
	operations, unknowns, keys int
	firstCause                 string
	page                       string // the visualization of an illegal history
	illegalKey                 string // the calls on the first key whose history is illegal
	reusedToken                string // an owner token two won claims returned
}

// checkLinearizability records the history and checks it; an illegal
// one is drawn in dir (the system's temporary directory when empty).
func checkLinearizability(t *testing.T, cfg LinearizabilityConfig, dir string) linResult {
	t.Helper()
	cfg = cfg.withDefaults()
	if len(cfg.Stores) == 0 {
		t.Fatal("storetest: LinearizabilityConfig.Stores is empty")
	}
	for _, s := range cfg.Stores {
		if _, ok := s.(store.Inspector); !ok {
			t.Fatalf("storetest: %T does not implement store.Inspector", s)
		}
	}
	ctx := t.Context()
	rec := newLinRecorder(cfg.CallTimeout, cfg.Fences, cfg.Failover)
	prefix := t.Name() + "/" + rand.Text() + "/"
	other := cfg.Stores[len(cfg.Stores)-1]
	if cfg.TokensPerInstance {
		other = cfg.Stores[0]
	}
	linScript(ctx, rec, prefix, cfg.Stores[0], other)

	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sk%d", prefix, i)
	}
	if cfg.OnKeys != nil {
		cfg.OnKeys(keys)
	}
	recordConcurrently(ctx, cfg, rec, keys)
	if cfg.Heal != nil {
		cfg.Heal()
	}
	for i, k := range keys {
		rec.call(ctx, 0, cfg.Stores[i%len(cfg.Stores)], linInput{op: opLookup, key: k})
	}

	history, unknowns := rec.history()
	res := linResult{operations: len(history), unknowns: unknowns, keys: len(keys) + 4}
	causes := map[string]int{}
	for _, op := range history {
		if out := op.Output.(linOutput); out.unknown && !op.Input.(linInput).op.pseudo() {
			causes[linCause(out.cause)]++
			if res.firstCause == "" {
				res.firstCause = out.cause
			}
		}
	}
	for cause, n := range causes {
		t.Logf("indeterminate: %d calls failed with %s", n, cause)
	}
	res.reusedToken = reusedToken(history)
	model := linModel()
	result, info := porcupine.CheckOperationsVerbose(model, history, cfg.CheckTimeout)
	res.result, res.verdict = result, map[porcupine.CheckResult]string{porcupine.Ok: "linearizable", porcupine.Illegal: "NOT linearizable", porcupine.Unknown: "check timed out"}[result]
	if result == porcupine.Illegal {
		res.page = linPagePath(t, dir)
		if err := porcupine.VisualizePath(model, info, res.page); err != nil {
			t.Errorf("write the visualization: %v", err)
		}
		var all string
		res.illegalKey, all = illegalKeyHistory(model, history)
		if err := os.WriteFile(strings.TrimSuffix(res.page, ".html")+".txt", []byte(all), 0o644); err != nil {
			t.Errorf("write the history: %v", err)
		}
	}
	return res
}

// recordConcurrently runs the clients, and the faults while they run.
func recordConcurrently(ctx context.Context, cfg LinearizabilityConfig, rec *linRecorder, keys []string) {
	pools := make([]*linTokens, len(cfg.Stores))
	for i := range pools {
		pools[i] = &linTokens{}
		if !cfg.TokensPerInstance && i > 0 {
			pools[i] = pools[0]
		}
	}
	seed := mrand.Uint64()
	var clients sync.WaitGroup
	for i := range cfg.Clients {
		c := &linClient{
			id: i + 1, rng: mrand.New(mrand.NewPCG(seed, uint64(i))), s: cfg.Stores[i%len(cfg.Stores)],
			rec: rec, pool: pools[i%len(cfg.Stores)], keys: keys, noPurge: cfg.WithoutPurges, failover: cfg.Failover,
			held: map[string]string{}, fences: map[string]string{},
		}
		clients.Go(func() { c.run(ctx, cfg.Operations, cfg.Until) })
	}
	if len(cfg.Faults) == 0 {
		clients.Wait()
		return
	}
	done := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		rng := mrand.New(mrand.NewPCG(seed, 0))
		tick := time.NewTicker(cfg.FaultEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				cfg.Faults[rng.IntN(len(cfg.Faults))]()
			}
		}
	})
	clients.Wait()
	close(done)
	faults.Wait()
}

// linPagePath is where the visualization of t's history goes.
func linPagePath(t *testing.T, dir string) string {
	if dir == "" {
		dir = os.TempDir()
	}
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	return filepath.Join(dir, "linearizability-"+name+".html")
}

// appendLine appends line to the file at path.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// linShownCalls is how many calls a failed check shows.
const linShownCalls = 25

// illegalKeyHistory describes, in the order they were made, the calls on
// the first key whose history alone is not linearizable: up to the first
// of them that no order explains (shown), and all of them.
func illegalKeyHistory(model porcupine.Model, history []porcupine.Operation) (shown, all string) {
	for _, part := range partitionByKey(history) {
		if porcupine.CheckOperations(model, part) {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		// The shortest illegal prefix (by call), and its last calls: where
		// the store went wrong, or near it.
		n := sort.Search(len(part), func(n int) bool { return !porcupine.CheckOperations(model, part[:n+1]) }) + 1
		return describeCalls(part[max(0, n-linShownCalls):min(n, len(part))]), describeCalls(part)
	}
	return "", ""
}

// describeCalls describes calls, one per line.
func describeCalls(calls []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range calls {
		ret := "never"
		if op.Return != math.MaxInt64 {
			ret = time.Duration(op.Return).String()
		}
		fmt.Fprintf(&b, "  client %d [%v, %s] %s\n", op.ClientId, time.Duration(op.Call), ret,
			describeLinOp(op.Input.(linInput), op.Output.(linOutput)))
	}
	return b.String()
}

// linCause is the last part of an error's message, where the cause is:
// the same for the calls that failed alike.
func linCause(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// reusedToken returns an owner token that two won claims of the history
// returned, on any keys, or "": the model sees one key at a time, and a
// token the store gave again after its first owner let go would own the
// second claim for the first owner.
func reusedToken(history []porcupine.Operation) string {
	seen := map[string]bool{}
	for _, op := range history {
		token := op.Output.(linOutput).token
		if token == "" {
			continue
		}
		if seen[token] {
			return token
		}
		seen[token] = true
	}
	return ""
}
