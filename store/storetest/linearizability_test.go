package storetest_test

import (
	"os"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizabilityReference: the reference store's histories are
// linearizable.
func TestLinearizabilityReference(t *testing.T) {
	t.Parallel()
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: []store.Store{newRefStore("")}})
}

// TestLinearizabilityCatchesBugs proves that the check can fail, on every
// run: for each planted bug, the history of a reference store with that
// bug is found not linearizable, and its visualization written.
func TestLinearizabilityCatchesBugs(t *testing.T) {
	t.Parallel()
	for _, bug := range []string{
		"claim-overwrites",      // a claim that drops NX: every claim wins
		"release-ignores-token", // a release that deletes another owner's claim
		"complete-ignores-token",
		"extend-ignores-token",
		"takeover-keeps-token", // a take-over that leaves the abandoned owner in charge
		"takeover-any-fingerprint",
		"purge-ignores-token",
		"purge-inflight",
		"release-deletes-completed",
		"winner-existing",
		"token-per-key", // a token given again once its first claim ended
	} {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			cfg := storetest.LinearizabilityConfig{Stores: []store.Store{newRefStore(bug)}, Clients: 1, Operations: 1}
			illegal, verdict, page := storetest.CheckLinearizability(t, cfg, t.TempDir())
			if !illegal {
				t.Fatalf("bug %q: the history was found %s", bug, verdict)
			}
			if info, err := os.Stat(page); err != nil || info.Size() == 0 {
				t.Fatalf("bug %q: no visualization written at %s (%v)", bug, page, err)
			}
		})
	}
}

// TestLinearizabilityReferenceFailover: the reference store's histories
// are linearizable with the calls and the model of
// LinearizabilityConfig.Failover.
func TestLinearizabilityReferenceFailover(t *testing.T) {
	t.Parallel()
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: []store.Store{newRefStore("")}, Failover: true, Keys: 32})
}
