// Package storetest is the conformance suite for implementations of
// [store.Store].
//
// Every implementation runs the same suite from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := memorystore.New()
//			t.Cleanup(func() { _ = s.Close() })
//			return s
//		})
//	}
//
// [Run] runs every case of the contract as a named parallel subtest, so a
// single case can be selected with go test -run, for example
// -run 'TestConformance/Token/ForeignToken'. Each subtest asks the factory
// for its own store. A networked store may hand out clients of one shared
// backend: every case uses keys of its own, made from the subtest name and a
// random suffix.
//
// # Inspection and invalidation
//
// Every store implements [store.Inspector], and the Inspect cases check
// it: Lookup, the fences of Purge (completed only by default, in flight
// only when asked, by token; atomic against a racing Complete and against
// other purges), List walked page by page with small pages and each
// filter, and Stats. A store that does not implement it fails them,
// unless [WithoutInspection] says it cannot. The Invalidate cases run on a
// store that also implements [store.Invalidator] (a store that cannot
// carry invalidations states its bound instead) and check, on one
// instance, that a purge is delivered, that a refused one is not, and that
// the channel closes with its context; that a purge reaches another
// instance over the same backend is each networked store's own test, and
// [RunPurgeLog]'s for the stores whose purges a polled log carries.
//
// # Linearizability
//
// [RunLinearizability] proves more than the cases try: it records a
// history of concurrent calls from many goroutines on several instances
// over one backend, with faults injected between them and the backend
// (dropped replies, cut connections, stalls, latency), and checks it with
// Porcupine against a sequential model of one key's entry. A call whose
// reply was lost may have taken effect or not (Jepsen's indeterminate
// operations), and a failed claim may release itself. A history that is
// not linearizable fails the test, and its drawing (an HTML page) and its
// calls are written to files the failure names. With
// [LinearizabilityConfig.Failover] it checks a backend that fails over to
// a replica while the calls run against what replica acknowledgement
// promises: no acknowledged claim or completion is lost.
//
// # Time
//
// The suite uses real time. Cases about expiry claim with a short lease
// ([WithLease], default 250ms) or complete with a short retention
// ([WithRetention], default 250ms) and sleep past them, so a store with
// real expiry (Redis PX) runs the suite unchanged. Every other case uses a
// lease and a retention of one minute, long enough that nothing expires
// while it runs. Checks that an entry is still alive are only asserted
// while the suite can prove, by measuring, that the entry's lease or
// retention has not run out, so a slow machine makes the suite log, not
// fail. The Duration cases claim, extend and complete with the longest
// durations a store is given (math.MaxInt64, and the interceptor's
// ceilings) and check that the entry holds: a store must take any positive
// duration as "a very long time".
//
// # Cancelled contexts
//
// A store may honour a context that is already cancelled or ignore it. The
// suite accepts either, but not a mix: an operation called with a cancelled
// context either returns an error matching errors.Is(err, context.Canceled)
// and changes nothing, or returns nil and behaves exactly as with a live
// context. It must never panic.
//
// # Empty data
//
// A completed entry stored with nil or empty data may come back as either
// nil or an empty slice: the suite checks its length. An in-flight entry
// must come back with nil Data. A winning [store.ClaimResult] must have a zero
// Existing entry.
package storetest
