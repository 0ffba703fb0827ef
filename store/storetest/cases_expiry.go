package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// tooSlow skips the case when the machine stalled so long that an entry
// the case needs alive may have expired: the suite cannot tell a store
// bug from a stall then, and does not guess.
func tooSlow(t *testing.T, since time.Time, ttl time.Duration, what string) {
	t.Helper()
	t.Skipf("%s took %v, past the %v TTL the case needs alive: machine too slow for this TTL (see WithLease, WithRetention)", what, time.Since(since), ttl)
}

func expiryCases() []testCase {
	return []testCase{
		{"LeaseExpiryFreesKey", func(t *testing.T, e *env) {
			key := e.key()
			old := e.claimWin(key, fingerprint(), e.lease)
			sleepPast(e.lease)
			fp := fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			if tok == old {
				t.Fatalf("claim after lease expiry got the expired token %q again", tok)
			}
			e.refusedAll("the expired owner's token", key, old)
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("new owner"))
			e.wantCompleted(key, fp, []byte("new owner"))
		}},
		{"ExpiredLeaseRefusesOwner", func(t *testing.T, e *env) {
			// Nobody claimed the key since: the owner has lost it anyway,
			// and its late Complete must not bring the entry back. Its
			// late Release finds nothing left to release.
			key := e.key()
			tok := e.claimWin(key, fingerprint(), e.lease)
			sleepPast(e.lease)
			e.refusedFree("the token of an expired lease", key, tok)
			e.wantFree(key)
		}},
		{"ExtendKeepsClaimAlive", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			claimed := time.Now()
			tok := e.claimWin(key, fp, e.lease)
			last := claimed // the lease runs until at least last+lease
			for time.Since(claimed) < 2*e.lease {
				time.Sleep(e.lease / 4)
				start := time.Now()
				err := e.s.Extend(e.ctx, key, tok, e.lease)
				if err != nil {
					if time.Since(last) >= e.lease {
						tooSlow(t, last, e.lease, "a step between two extends")
					}
					t.Fatalf("Extend %v after the claim, within the lease: %v", time.Since(claimed), err)
				}
				last = start
			}
			err := e.s.Extend(e.ctx, key, tok, longTTL)
			if err != nil && time.Since(last) >= e.lease {
				tooSlow(t, last, e.lease, "the last extend")
			}
			e.ok("Extend past the original lease", err)
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("kept alive"))
			e.wantCompleted(key, fp, []byte("kept alive"))
		}},
		{"ExtendSetsLeaseFromNow", func(t *testing.T, e *env) {
			// Extend sets the lease to the given duration from now, even
			// when that is shorter than what was left.
			key := e.key()
			tok := e.claimWin(key, fingerprint(), longTTL)
			e.ok("Extend with a short lease", e.s.Extend(e.ctx, key, tok, e.lease))
			sleepPast(e.lease)
			e.wantFree(key)
			e.refusedAll("the token of an expired lease", key, tok)
		}},
		{"RetentionExpiryFreesKey", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			start := time.Now()
			e.ok("Complete with a short retention", e.s.Complete(e.ctx, key, tok, []byte("short-lived"), e.retention))
			c, err := e.s.Claim(e.ctx, key, probe, longTTL, store.ClaimOptions{})
			e.ok("Claim of a completed key", err)
			if time.Since(start) >= e.retention {
				tooSlow(t, start, e.retention, "Complete and Claim")
			}
			if c.Won() || c.Existing.State != store.StateCompleted || !bytes.Equal(c.Existing.Data, []byte("short-lived")) {
				t.Fatalf("Claim within the retention: won=%v existing %s, want the completed entry", c.Won(), describe(c.Existing))
			}
			sleepPast(e.retention)
			next := e.wantFree(key)
			e.refusedAll("the token that completed the expired entry", key, tok)
			e.complete(key, next, []byte("second life"))
		}},
		{"CompletedOutlivesLease", func(t *testing.T, e *env) {
			// Completing replaces the lease with the retention.
			key, fp := e.key(), fingerprint()
			start := time.Now()
			tok := e.claimWin(key, fp, e.lease)
			err := e.s.Complete(e.ctx, key, tok, []byte("kept"), longTTL)
			if errors.Is(err, store.ErrLeaseLost) && time.Since(start) >= e.lease {
				tooSlow(t, start, e.lease, "Claim and Complete")
			}
			e.ok("Complete within the lease", err)
			sleepPast(e.lease)
			e.wantCompleted(key, fp, []byte("kept"))
		}},
	}
}
