package storetest

import (
	"math"
	"testing"
	"time"
)

// longDurations are the longest leases and retentions a store is given:
// the largest time.Duration (about 292 years, what durationpb.AsDuration
// clamps a larger proto duration to) and the interceptor's ceilings,
// the longest retention (ten years) and lease (a day) the idempotency package sets.
// A store takes each as "a very long time": it never expires the entry
// early and never refuses the duration.
var longDurations = []struct {
	name string
	d    time.Duration
}{
	{"MaxInt64", math.MaxInt64},
	{"TenYears", 10 * 365 * 24 * time.Hour},
	{"OneDay", 24 * time.Hour},
}

func durationCases() []testCase {
	var cases []testCase
	for _, ld := range longDurations {
		d := ld.d
		cases = append(cases,
			testCase{"Lease" + ld.name, func(t *testing.T, e *env) {
				// The claim holds; the fenced steps take the same lease.
				key, fp := e.key(), fingerprint()
				tok := e.claimWin(key, fp, d)
				e.wantInFlight(key, fp)
				e.ok("Extend with the owner token", e.s.Extend(e.ctx, key, tok, d))
				e.wantInFlight(key, fp)
				e.refusedAll("a made-up token", key, "storetest-not-a-token")
				e.wantInFlight(key, fp)
				e.complete(key, tok, []byte("held"))
				e.wantCompleted(key, fp, []byte("held"))
			}},
			testCase{"ReleaseAfterLease" + ld.name, func(t *testing.T, e *env) {
				key := e.key()
				tok := e.claimWin(key, fingerprint(), d)
				e.ok("Release with the owner token", e.s.Release(e.ctx, key, tok))
				e.wantFree(key)
			}},
			testCase{"Retention" + ld.name, func(t *testing.T, e *env) {
				// The outcome is kept; the resend of Complete is a no-op
				// success and the other steps are refused.
				key, fp := e.key(), fingerprint()
				tok := e.claimWin(key, fp, longTTL)
				e.ok("Complete with the owner token", e.s.Complete(e.ctx, key, tok, []byte("kept"), d))
				e.wantCompleted(key, fp, []byte("kept"))
				e.ok("Complete again with the token that completed it", e.s.Complete(e.ctx, key, tok, []byte("intruder"), d))
				e.wantLeaseLost("Extend with the token that completed it", e.s.Extend(e.ctx, key, tok, d))
				e.wantLeaseLost("Release with the token that completed it", e.s.Release(e.ctx, key, tok))
				e.wantCompleted(key, fp, []byte("kept"))
			}},
		)
	}
	return cases
}
