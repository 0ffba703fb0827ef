package idempotency_test

import (
	"context"
	"crypto/rand"
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
// one was killed at a point: the side effects recorded in all, and whether
// the retry is a replay of the killed process's stored answer.
type killExpect struct {
	effectsAtKill, effects int
	replayed               bool
}

// killExpected is the documented behaviour today, the abandoned claim
// re-run once its lease ends (decision 289).
var killExpected = map[killpoint.Point]killExpect{
	// The claim was taken, nothing done: the retry runs the key once its
	// lease ends, and the side effect happens once.
	killpoint.BeforeEffect: {effectsAtKill: 0, effects: 1},
	// Re-run, as documented: the side effect happened, the outcome was
	// not stored, and the retry runs the handler again once the lease
	// ends. Two side effects. This is the row a policy for abandoned
	// claims (block, recover) changes: its tests expect 1 here.
	killpoint.AfterEffect: {effectsAtKill: 1, effects: 2},
	// The outcome was stored: the retry replays the killed process's
	// answer, and the side effect happened once.
	killpoint.AfterComplete: {effectsAtKill: 1, effects: 1, replayed: true},
}

// TestKillMidCall runs the service as real OS processes (the binary of
// internal/killtest/killserver, built by the test) over each shared store,
// kills a process with SIGKILL while it serves a call, at each point that
// matters (before the side effect; after it, before the outcome is
// stored; after the outcome is stored, before the answer is sent), and
// retries the call's key on a second process until it answers. The side
// effects are counted outside the processes (a Redis list, a PostgreSQL
// table). The kill happens when the process says that the call reached
// the point, not after a sleep. It proves decision 289 and the "a server
// dies between the handler's side effect and storing its outcome" row of
// the durability table, and prints, per store and point, the trials and
// the executions counted.
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
			args := append(slices.Clone(b.args), "-lease", killLease.String())
			second := killtest.Start(ctx, t, bin, args...)
			retry := killtest.Dial(t, second.Addr(), idempotency.WithMaxAttempts(10))
			for _, point := range killpoint.Points {
				t.Run(string(point), func(t *testing.T) {
					t.Parallel()
					start := time.Now()
					var executions, replays int
					for i := range trials {
						key := fmt.Sprintf("kill-%s-%s-%d-%s", name, point, i, rand.Text()[:8])
						n, replayed := killTrial(ctx, t, bin, args, point, key, second, retry, b)
						executions += n
						if replayed {
							replays++
						}
					}
					// Printed, not logged: the counts are the test's
					// output, shown under go test -v, and appended to
					// the file IDEMPOTENCY_KILL_REPORT names, which CI
					// prints after the test command.
					reportKill(t, fmt.Sprintf("kill: store %s, killed %s: %d trials, %d executions (%d second executions), %d replays, in %v\n",
						name, point, trials, executions, executions-trials, replays, time.Since(start).Round(time.Millisecond)))
				})
			}
		})
	}
}

// killTrial starts a process with args, calls it with key, kills it when
// the call reaches point, retries key on second through retry, and checks
// what killExpected says. It returns the side effects of key and whether
// the retry was a replay.
func killTrial(ctx context.Context, t *testing.T, bin string, args []string, point killpoint.Point,
	key string, second *killtest.Process, retry *killtest.Client, b killBackend,
) (executions int, replayed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(ctx, killTrialTimeout, fmt.Errorf("trial of %s not over within %v", key, killTrialTimeout))
	defer cancel()
	want := killExpected[point]
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
	if err != nil {
		t.Fatalf("retry of %s on process %d after killing process %d at %s: %v", key, second.PID(), first.PID(), point, err)
	}
	executions = countEffects(ctx, t, b, key)
	wantPID := second.PID()
	if want.replayed {
		wantPID = first.PID()
	}
	if executions != want.effects || answer.Replayed != want.replayed || answer.PID != wantPID {
		t.Fatalf("killed process %d at %s, retried on %d: %d side effects, answer of process %d, replayed %v; want %d, of %d, replayed %v",
			first.PID(), point, second.PID(), executions, answer.PID, answer.Replayed, want.effects, wantPID, want.replayed)
	}
	return executions, answer.Replayed
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
