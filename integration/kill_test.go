package idempotency_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
)

// killTrialsEnv sets how many trials TestKillMidCall makes per store and
// kill point; the default keeps CI quick.
const (
	killTrialsEnv     = "IDEMPOTENCY_KILL_TRIALS"
	killTrialsDefault = 3
	// killLease is the binary's lease: what a retry waits, after a
	// process is killed holding a claim, before the key runs again. It is
	// long enough that a loaded machine renews it in time.
	killLease = 2 * time.Second
	// killTimeout bounds the whole test, and killTrialTimeout each trial,
	// so that a hang fails it with what was awaited.
	killTimeout      = 5 * time.Minute
	killTrialTimeout = time.Minute
)

// killExpect is what a retry on a second process finds after the first
// one was killed at a point: the side effects recorded in all, whether
// the retry is a replay of the killed process's stored answer, whether it
// is refused as blocked (IDEMPOTENCY_OUTCOME_UNKNOWN), and whether its
// answer names the killed process (a replay, or a recovered outcome).
type killExpect struct {
	effectsAtKill, effects int
	replayed, blocked      bool
	killedAnswers          bool
}

// killPolicies are the values of the binary's -abandoned flag that the
// test runs: each is one server-wide option (WithAbandonedClaims).
var killPolicies = []string{"rerun", "block", "recover"}

// killExpected is the documented behaviour, by policy for abandoned claims
// and kill point: decision 289 for re-run, and the decisions of
// docs/semantics/abandoned.md for block and recover.
var killExpected = map[string]map[killpoint.Point]killExpect{
	"rerun": {
		// The claim was taken, nothing done: the retry runs the key once
		// its lease ends, and the side effect happens once.
		killpoint.BeforeEffect: {effectsAtKill: 0, effects: 1},
		// Re-run, as documented: the side effect happened, the outcome
		// was not stored, and the retry runs the handler again once the
		// lease ends. Two side effects: the row block and recover change.
		killpoint.AfterEffect: {effectsAtKill: 1, effects: 2},
		// The outcome was stored: the retry replays the killed process's
		// answer, and the side effect happened once.
		killpoint.AfterComplete: {effectsAtKill: 1, effects: 1, replayed: true, killedAnswers: true},
	},
	"block": {
		// Nobody knows that nothing was done: the key is blocked, and
		// nothing runs. The price of never twice.
		killpoint.BeforeEffect:  {effectsAtKill: 0, effects: 0, blocked: true},
		killpoint.AfterEffect:   {effectsAtKill: 1, effects: 1, blocked: true},
		killpoint.AfterComplete: {effectsAtKill: 1, effects: 1, replayed: true, killedAnswers: true},
	},
	"recover": {
		// The recovery finds no side effect and asks for a re-run: the
		// second process runs the handler, once.
		killpoint.BeforeEffect: {effectsAtKill: 0, effects: 1},
		// The recovery finds the killed process's side effect and answers
		// with it: one side effect, the killed process's answer.
		killpoint.AfterEffect:   {effectsAtKill: 1, effects: 1, killedAnswers: true},
		killpoint.AfterComplete: {effectsAtKill: 1, effects: 1, replayed: true, killedAnswers: true},
	},
}

// TestKillMidCall runs the service as real OS processes (the binary of
// internal/killtest/killserver, built by the test) over each store that
// outlives a process (Redis, PostgreSQL, MySQL, and a SQLite file that
// the second process opens after the first is killed), kills a process
// with SIGKILL while it serves a call, at each point that matters (before
// the side effect; after it, before the outcome is stored; after the
// outcome is stored, before the answer is sent), and retries the call's
// key on a second process until it answers. The side effects are counted
// outside the processes (a Redis list, a PostgreSQL table, a table of the
// SQLite file that the test reads). The kill happens when the process
// says that the call reached the point, not after a sleep. It proves
// decision 289 and the "a server dies between the handler's side effect
// and storing its outcome" row of the durability table, and prints, per
// store and point, the trials and the executions counted, under each
// policy for abandoned claims (re-run, block, recover), each set with one
// server-wide option: under block and recover, no trial runs the handler
// twice.
func TestKillMidCall(t *testing.T) {
	t.Parallel()
	trials := killTrials(t)
	ctx, cancel := context.WithTimeout(t.Context(), killTimeout)
	t.Cleanup(cancel) // after the subtests, which run once this function returns
	start := time.Now()
	bin := killtest.Build(ctx, t, t.TempDir())
	t.Logf("built the server binary in %v", time.Since(start).Round(time.Millisecond))
	for name, backend := range killBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := backend(t)
			for _, policy := range killPolicies {
				t.Run(policy, func(t *testing.T) {
					t.Parallel()
					args := append(b.args(), "-lease", killLease.String(), "-abandoned", policy)
					second := killtest.Start(ctx, t, bin, args...)
					retry := killtest.Dial(t, second.Addr(), idempotency.WithMaxAttempts(10))
					for _, point := range killpoint.Points {
						t.Run(string(point), func(t *testing.T) {
							t.Parallel()
							start := time.Now()
							want := killExpected[policy][point]
							var executions, replays, blocked int
							for i := range trials {
								key := fmt.Sprintf("kill-%s-%s-%s-%d-%s", name, policy, point, i, rand.Text()[:8])
								n, got := killTrial(ctx, t, bin, args, point, key, second, retry, b, want)
								executions += n
								if got.replayed {
									replays++
								}
								if got.blocked {
									blocked++
								}
							}
							// Printed, not logged: the counts are the
							// test's output, shown under go test -v, and
							// appended to the file IDEMPOTENCY_KILL_REPORT
							// names, which CI prints after the test command.
							reportKill(t, fmt.Sprintf("kill: store %s, policy %s, killed %s: %d trials, %d executions (%d second executions), %d replays, %d blocked, in %v\n",
								name, policy, point, trials, executions, max(executions-trials, 0), replays, blocked, time.Since(start).Round(time.Millisecond)))
						})
					}
				})
			}
		})
	}
}

// killTrial starts a process with args, calls it with key, kills it when
// the call reaches point, retries key on second through retry, and checks
// what want says. It returns the side effects of key and what the retry
// got.
func killTrial(ctx context.Context, t *testing.T, bin string, args []string, point killpoint.Point,
	key string, second *killtest.Process, retry *killtest.Client, b killBackend, want killExpect,
) (executions int, got killExpect) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(ctx, killTrialTimeout, fmt.Errorf("trial of %s not over within %v", key, killTrialTimeout))
	defer cancel()
	first := killtest.Start(ctx, t, bin, append(slices.Clone(args), "-kill-at", string(point))...)
	calls := killtest.Dial(t, first.Addr(), idempotency.WithoutRetry())
	errs := make(chan error, 1)
	go func() {
		_, err := calls.Charge(ctx, key)
		errs <- err
	}()
	stop := first.WaitStop(ctx, t)
	if stop.Point != point || stop.Key != key {
		t.Fatalf("process %d stopped at %s for %s, want %s for %s", first.PID(), stop.Point, stop.Key, point, key)
	}
	if point == killpoint.AfterComplete && stop.Decision != idempotency.DecisionExecuted.String() {
		t.Fatalf("process %d reached %s with decision %s, want %s: the outcome was not stored (a lease lost under load?)",
			first.PID(), point, stop.Decision, idempotency.DecisionExecuted)
	}
	if n := countEffects(ctx, t, b, key); n != want.effectsAtKill {
		t.Fatalf("%d side effects when process %d reached %s, want %d", n, first.PID(), point, want.effectsAtKill)
	}
	first.Kill(t)
	if err := <-errs; err == nil {
		t.Fatalf("the call to process %d answered, though it was killed at %s", first.PID(), point)
	}
	answer, err := retry.Charge(ctx, key)
	executions = countEffects(ctx, t, b, key)
	if want.blocked {
		if !errors.Is(err, idempotency.ErrOutcomeUnknown) {
			t.Fatalf("retry of %s on process %d after killing process %d at %s: %v (answer %+v), want %s",
				key, second.PID(), first.PID(), point, err, answer, idempotency.ErrOutcomeUnknown.Reason)
		}
		if executions != want.effects {
			t.Fatalf("killed process %d at %s, retried on %d: blocked, but %d side effects, want %d", first.PID(), point, second.PID(), executions, want.effects)
		}
		return executions, killExpect{blocked: true}
	}
	if err != nil {
		t.Fatalf("retry of %s on process %d after killing process %d at %s: %v", key, second.PID(), first.PID(), point, err)
	}
	wantPID := second.PID()
	if want.killedAnswers {
		wantPID = first.PID()
	}
	if executions != want.effects || answer.Replayed != want.replayed || answer.PID != wantPID {
		t.Fatalf("killed process %d at %s, retried on %d: %d side effects, answer of process %d, replayed %v; want %d, of %d, replayed %v",
			first.PID(), point, second.PID(), executions, answer.PID, answer.Replayed, want.effects, wantPID, want.replayed)
	}
	return executions, killExpect{replayed: answer.Replayed}
}

// countEffects counts the side effects of key.
func countEffects(ctx context.Context, t *testing.T, b killBackend, key string) int {
	t.Helper()
	n, err := b.effects(ctx, key)
	if err != nil {
		t.Fatalf("counting the side effects of %s: %v", key, err)
	}
	return n
}

// killTrials is the number of trials of killTrialsEnv, or its default.
func killTrials(t *testing.T) int {
	t.Helper()
	s := strings.TrimSpace(os.Getenv(killTrialsEnv))
	if s == "" {
		return killTrialsDefault
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number of trials", killTrialsEnv, s)
	}
	return n
}

// reportKill prints line and appends it to the file IDEMPOTENCY_KILL_REPORT
// names, when it names one: go test shows a passing package's output only
// under -v, and CI runs the README's test command without it.
func reportKill(t *testing.T, line string) {
	t.Helper()
	fmt.Print(line)
	path := os.Getenv("IDEMPOTENCY_KILL_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("IDEMPOTENCY_KILL_REPORT: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatalf("IDEMPOTENCY_KILL_REPORT: %v", err)
	}
}
