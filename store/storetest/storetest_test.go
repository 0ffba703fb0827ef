package storetest_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestReferenceStore runs the suite against the correct reference store.
func TestReferenceStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return newRefStore("") })
}

// mutantEnv names the bug TestMutant plants; TestMutant does nothing
// without it.
const mutantEnv = "STORETEST_MUTANT"

// TestMutant runs the suite against a reference store with one bug. It is
// run by TestSuiteCatchesBugs in a child process, and expected to fail.
func TestMutant(t *testing.T) {
	bug := os.Getenv(mutantEnv)
	if bug == "" {
		t.Skip("run by TestSuiteCatchesBugs")
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		if bug == "not-inspectable" {
			return notInspectable{newRefStore("")}
		}
		return newRefStore(bug)
	})
}

// notInspectable hides the Inspector of the store it holds.
type notInspectable struct{ store.Store }

// TestWithoutInspection: a store that does not implement store.Inspector
// passes the suite with WithoutInspection, and fails it without (see
// TestSuiteCatchesBugs, bug not-inspectable).
func TestWithoutInspection(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return notInspectable{newRefStore("")} }, storetest.WithoutInspection())
}

// TestSuiteCatchesBugs proves that the suite's checks can fail: for each
// planted bug, the cases named must fail (and the run must not pass).
func TestSuiteCatchesBugs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bug  string
		fail []string // group/case names that must fail
	}{
		{"complete-ignores-token", []string{"Token/ForeignTokenChangesNothing", "Token/StaleTokenChangesNothing"}},
		{"release-ignores-token", []string{"Token/ForeignTokenChangesNothing", "Token/StaleTokenChangesNothing"}},
		{"extend-ignores-token", []string{"Token/ForeignTokenChangesNothing", "Token/StaleTokenChangesNothing"}},
		{"empty-token-completed", []string{"Token/CompletedRefusesEveryToken"}},
		{"constant-token", []string{"Token/TokensAreUnique", "Token/StaleTokenChangesNothing"}},
		{"complete-creates", []string{"Complete/CompleteFreeKeyRefused"}},
		{"release-free-lease-lost", []string{"Release/FreeKeyIsANoOp", "Release/SecondReleaseIsANoOp", "Token/FreeKeyRefusesEveryToken", "Expiry/ExpiredLeaseRefusesOwner"}},
		{"release-deletes-completed", []string{"Release/AfterCompleteRefused", "Release/OtherOwnerUntouched", "Token/CompletedRefusesEveryToken"}},
		{"no-copy-data", []string{"Complete/CompleteCopiesData"}},
		{"truncate-data", []string{"Complete/LargeData4MiB"}},
		{"keep-fingerprint", []string{"Claim/ClaimCopiesFingerprint"}},
		{"echo-fingerprint", []string{"Claim/ExistingReportsStoredFingerprint", "Claim/BinaryKey"}},
		{"inflight-empty-data", []string{"Claim/SecondClaimSeesInFlight"}},
		{"winner-existing", []string{"Claim/NewKeyWins"}},
		{"never-expires", []string{"Expiry/LeaseExpiryFreesKey", "Expiry/RetentionExpiryFreesKey", "Expiry/ExtendSetsLeaseFromNow"}},
		{"expired-owner-ok", []string{"Expiry/ExpiredLeaseRefusesOwner"}},
		{"extend-no-effect", []string{"Expiry/ExtendKeepsClaimAlive"}},
		{"extend-only-longer", []string{"Expiry/ExtendSetsLeaseFromNow"}},
		{"complete-keeps-lease", []string{"Expiry/CompletedOutlivesLease"}},
		{"read-then-write", []string{"Concurrency/OneWinnerAmongThousand", "Concurrency/ManyKeysCompletedOnce"}},
		{"cancel-wrong-error", []string{"Context/CancelledClaim", "Context/CancelledComplete"}},
		{"cancel-panics", []string{"Context/CancelledClaim"}},
		{"negative-keep", []string{"Abandoned/NegativeKeepRefused"}},
		{"keep-ignored", []string{"Abandoned/LapsedLeaseIsAbandoned", "Abandoned/AbandonNow", "Abandoned/ExtendKeepsTheKeep"}},
		{"takeover-any-fingerprint", []string{"Abandoned/TakeOverNeedsTheSameFingerprint"}},
		{"takeover-live", []string{"Abandoned/TakeOverLeavesOtherStates", "Abandoned/LapsedLeaseIsAbandoned"}},
		{"takeover-attempt-one", []string{"Abandoned/TakeOverFencesTheAbandonedOwner", "Abandoned/AttemptsCount"}},
		{"takeover-new-keep", []string{"Abandoned/TakeOverKeepsTheKeep"}},
		{"takeover-keeps-token", []string{"Abandoned/TakeOverFencesTheAbandonedOwner"}},
		{"extend-revives", []string{"Abandoned/LapsedLeaseIsAbandoned", "Abandoned/AbandonNow"}},
		{"abandon-ignores-token", []string{"Abandoned/AbandonNow"}},
		{"not-inspectable", []string{"Inspect/LookupInFlight", "Inspect/PurgeCompleted", "Inspect/ListWalksEveryEntry", "Inspect/Stats"}},
		{"lookup-expired", []string{"Inspect/ExpiredIsNotFound"}},
		{"lookup-shares-data", []string{"Inspect/LookupCopies"}},
		{"purge-inflight", []string{"Inspect/PurgeInFlightRefused", "Invalidate/RefusedPurgeIsNotDelivered"}},
		{"purge-completed-forced", []string{"Inspect/PurgeInFlightOnCompleted", "Inspect/PurgeRacesComplete"}},
		{"purge-ignores-token", []string{"Inspect/PurgeFencedByToken"}},
		{"purge-read-then-delete", []string{"Inspect/PurgeRacesPurge"}},
		{"purge-no-invalidation", []string{"Invalidate/PurgeIsDelivered"}},
		{"list-skips-last", []string{"Inspect/ListWalksEveryEntry"}},
		{"list-ignores-state", []string{"Inspect/ListWalksEveryEntry"}},
		{"list-data", []string{"Inspect/ListWalksEveryEntry"}},
		{"list-cursor-unsafe", []string{"Inspect/ListWalksEveryEntry"}},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			t.Parallel()
			// Run only the cases expected to fail; they mostly sleep, so
			// run them all at once.
			var groups, cases []string
			for _, name := range tc.fail {
				g, c, _ := strings.Cut(name, "/")
				groups, cases = append(groups, g), append(cases, c)
			}
			run := "^TestMutant$/^(" + strings.Join(groups, "|") + ")$/^(" + strings.Join(cases, "|") + ")$"
			cmd := exec.CommandContext(t.Context(), os.Args[0],
				"-test.run="+run, "-test.v", "-test.count=1", "-test.parallel=16")
			cmd.Env = append(os.Environ(), mutantEnv+"="+tc.bug)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with bug %q:\n%s", tc.bug, out)
			}
			for _, name := range tc.fail {
				if tc.bug == "cancel-panics" {
					if !regexp.MustCompile(`panic: cancelled`).Match(out) {
						t.Errorf("bug %q: no panic reported:\n%s", tc.bug, out)
					}
					continue
				}
				if !strings.Contains(string(out), "--- FAIL: TestMutant/"+name+" ") {
					t.Errorf("bug %q: case %s did not fail:\n%s", tc.bug, name, out)
				}
			}
		})
	}
}
