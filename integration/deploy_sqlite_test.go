package idempotency_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
)

// deployTimeout bounds TestDeployFromSQLiteToShared, so that a hang fails
// it with what was awaited.
const deployTimeout = 3 * time.Minute

// deployKeys is how many keys the process on the SQLite file completes
// before the deploy.
const deployKeys = 5

// TestDeployFromSQLiteToShared deploys a service off SQLite, as
// docs/stores.md ("Which store to start with") says, with real processes
// of the kill tests' server binary (decisions 312 and 313). Process 1
// serves on a sqlitestore over a file and completes deployKeys keys, each
// with one side effect, counted outside the processes (in the shared
// store's Redis or PostgreSQL). It is stopped, with SIGTERM as a deploy
// does, or killed with SIGKILL while a further key is in flight, after
// its side effect and before its outcome is stored. Process 2 opens the
// same file and serves on migratestore.New(sqlitestore on the file, the
// shared store): each completed key replays process 1's answer byte for
// byte with no second side effect; the key in flight follows the policy
// for abandoned claims (recover: process 1's answer, from its side
// effect, and no second one); a new key runs once. Then process 3 serves
// on the shared store alone, as the move ends: the new key, and the
// recovered one, replay from it; a key completed on the file alone runs
// again there, which is why the move waits for the longest retention
// before it ends.
func TestDeployFromSQLiteToShared(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), deployTimeout)
	t.Cleanup(cancel) // after the subtests, which run once this function returns
	bin := killtest.Build(ctx, t, t.TempDir())
	backends := killBackends()
	for _, to := range []string{"redis", "postgres"} {
		for _, killed := range []bool{false, true} {
			name := to + "/sigterm"
			if killed {
				name = to + "/sigkill-in-flight"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				deployFromSQLite(ctx, t, bin, backends[to](t), killed)
			})
		}
	}
}

// deployFromSQLite runs one deploy of TestDeployFromSQLiteToShared, to
// the shared store of b; killed says whether process 1 is killed with a
// key in flight rather than stopped with SIGTERM.
func deployFromSQLite(ctx context.Context, t *testing.T, bin string, b killBackend, killed bool) {
	_, _, file := newSQLiteStore(t)
	tag := rand.Text()[:8]
	policy := []string{"-lease", killLease.String(), "-abandoned", "rerun"}
	if killed {
		policy = []string{"-lease", killLease.String(), "-abandoned", "recover"}
	}
	onFile := slices.Concat([]string{"-store", "sqlite", "-store-url", file}, b.effect, policy)
	inFlight := "inflight-" + tag
	if killed {
		onFile = append(onFile, "-kill-at", string(killpoint.AfterEffect), "-kill-keys", "inflight-")
	}

	// Process 1, on the file.
	first := killtest.Start(ctx, t, bin, onFile...)
	calls := killtest.Dial(t, first.Addr(), idempotency.WithoutRetry())
	keys := make([]string, deployKeys)
	answers := make(map[string]killtest.Answer, deployKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("done-%s-%d", tag, i)
		answers[keys[i]] = chargeOnce(ctx, t, calls, b, keys[i], first.PID())
	}
	if killed {
		errs := make(chan error, 1)
		go func() {
			_, err := calls.Charge(ctx, inFlight)
			errs <- err
		}()
		if stop := first.WaitStop(ctx, t); stop.Point != killpoint.AfterEffect || stop.Key != inFlight {
			t.Fatalf("process %d stopped at %s for %s, want %s for %s", first.PID(), stop.Point, stop.Key, killpoint.AfterEffect, inFlight)
		}
		first.Kill(t)
		if err := <-errs; err == nil {
			t.Fatalf("the call of %s answered, though process %d was killed", inFlight, first.PID())
		}
	} else {
		first.Terminate(ctx, t)
	}

	// Process 2, on the move: the old file, then the shared store.
	moving := slices.Concat(b.store, b.effect, policy, []string{"-from-sqlite", file})
	second := killtest.Start(ctx, t, bin, moving...)
	retry := killtest.Dial(t, second.Addr(), idempotency.WithMaxAttempts(10))
	for _, key := range keys {
		a, err := retry.Charge(ctx, key)
		if err != nil {
			t.Fatalf("retry of %s on process %d, after the deploy: %v", key, second.PID(), err)
		}
		want := answers[key]
		if !a.Replayed || a.PID != first.PID() || !bytes.Equal(a.Wire, want.Wire) {
			t.Fatalf("retry of %s on process %d: answer of process %d %x, replayed %v; want process %d's %x, replayed",
				key, second.PID(), a.PID, a.Wire, a.Replayed, first.PID(), want.Wire)
		}
		wantEffects(ctx, t, b, key, 1)
	}
	if killed {
		a, err := retry.Charge(ctx, inFlight)
		if err != nil || a.PID != first.PID() {
			t.Fatalf("retry of %s on process %d, killed in flight on process %d: %+v, %v; want the answer recovered from process %d's side effect",
				inFlight, second.PID(), first.PID(), a, err, first.PID())
		}
		wantEffects(ctx, t, b, inFlight, 1)
	}
	fresh := "new-" + tag
	a := chargeOnce(ctx, t, retry, b, fresh, second.PID())
	second.Terminate(ctx, t)

	// Process 3, on the shared store alone: the move is over.
	third := killtest.Start(ctx, t, bin, slices.Concat(b.store, b.effect, policy)...)
	after := killtest.Dial(t, third.Addr(), idempotency.WithMaxAttempts(10))
	replays := map[string]killtest.Answer{fresh: a}
	if killed {
		replays[inFlight] = killtest.Answer{PID: first.PID()}
	}
	for key, want := range replays {
		got, err := after.Charge(ctx, key)
		if err != nil || !got.Replayed || got.PID != want.PID {
			t.Fatalf("retry of %s on process %d, on the shared store alone: %+v, %v; want a replay of process %d's answer",
				key, third.PID(), got, err, want.PID)
		}
		wantEffects(ctx, t, b, key, 1)
	}
	// A key completed on the file alone is not in the shared store (a
	// replay through the adapter copies nothing): served on the shared
	// store alone before the longest retention has passed, it runs again.
	// Hence step 3 of the move (decision 313).
	if got, err := after.Charge(ctx, keys[0]); err != nil || got.Replayed || got.PID != third.PID() {
		t.Fatalf("retry of %s on process %d, on the shared store alone: %+v, %v; want a second execution there (the key was completed on the file alone)",
			keys[0], third.PID(), got, err)
	}
	wantEffects(ctx, t, b, keys[0], 2)
}

// chargeOnce calls key through calls, a client of the process pid, and
// fails t unless the handler ran there, once: an answer of pid, not
// replayed, and one side effect of key. It returns the answer.
func chargeOnce(ctx context.Context, t *testing.T, calls *killtest.Client, b killBackend, key string, pid int) killtest.Answer {
	t.Helper()
	a, err := calls.Charge(ctx, key)
	if err != nil || a.Replayed || a.PID != pid {
		t.Fatalf("call of %s on process %d: %+v, %v; want an execution there", key, pid, a, err)
	}
	wantEffects(ctx, t, b, key, 1)
	return a
}

// wantEffects fails t unless key has n side effects.
func wantEffects(ctx context.Context, t *testing.T, b killBackend, key string, n int) {
	t.Helper()
	if got := countEffects(ctx, t, b, key); got != n {
		t.Fatalf("%d side effects of %s, want %d", got, key, n)
	}
}
