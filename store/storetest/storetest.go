package storetest

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

// Run runs the conformance suite against the stores that newStore makes.
// Every case is a parallel subtest named group/case (for example
// Claim/NewKeyWins) that calls newStore once; newStore registers any
// cleanup it needs with t.Cleanup. The suite takes a few seconds, most of
// it spent sleeping past the short lease and retention set with
// [WithLease] and [WithRetention].
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts ...Option) {
	t.Helper()
	s := &suite{newStore: newStore, config: newConfig(opts)}
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, s.begin(t))
				})
			}
		})
	}
}

type suite struct {
	newStore func(t *testing.T) store.Store
	config
}

type group struct {
	name  string
	cases []testCase
}

type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// groups lists every case of the suite; each group lives in a file of
// its own.
func groups() []group {
	return []group{
		{"Claim", claimCases()},
		{"Complete", completeCases()},
		{"Token", tokenCases()},
		{"Release", releaseCases()},
		{"Extend", extendCases()},
		{"Expiry", expiryCases()},
		{"Abandoned", abandonedCases()},
		{"Duration", durationCases()},
		{"Concurrency", concurrencyCases()},
		{"Context", contextCases()},
		{"Inspect", inspectCases()},
		{"Invalidate", invalidateCases()},
	}
}
