package storetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

// purgeCases are the cases of store.Inspector.Purge.
func purgeCases() []testCase {
	return []testCase{
		{"PurgeCompleted", func(t *testing.T, e *env) {
			key, fp, data := e.key(), fingerprint(), randomData(100)
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, data)
			info, err := e.inspector().Purge(e.ctx, key, store.PurgeOptions{})
			e.ok("Purge of a completed entry", err)
			if info.Key != key || info.State != store.StateCompleted || !bytes.Equal(info.Data, data) || !bytes.Equal(info.Fingerprint, fp) {
				t.Fatalf("Purge returned %q %s data=%s, want the completed entry it purged", info.Key, info.State, head(info.Data))
			}
			_, err = e.inspector().Lookup(e.ctx, key)
			e.wantErr("Lookup after Purge", err, store.ErrNotFound)
			// The owner's resent Complete does not bring it back.
			e.wantLeaseLost("Complete resent by the owner after Purge", e.s.Complete(e.ctx, key, tok, data, longTTL))
			e.wantFree(key)
		}},
		{"PurgeFreeKey", func(t *testing.T, e *env) {
			info, err := e.inspector().Purge(e.ctx, e.key(), store.PurgeOptions{})
			e.wantErr("Purge of a key never claimed", err, store.ErrNotFound)
			if info.State != 0 || info.Key != "" {
				t.Fatalf("Purge of a free key returned %+v, want the zero Info", info)
			}
		}},
		{"PurgeInFlightRefused", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			info, err := e.inspector().Purge(e.ctx, key, store.PurgeOptions{})
			e.wantErr("Purge of an in-flight entry without InFlight", err, store.ErrInFlight)
			if info.State != store.StateInFlight || !bytes.Equal(info.Fingerprint, fp) {
				t.Fatalf("refused Purge returned %s, want the in-flight entry it found", info.State)
			}
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("done"))
			e.wantCompleted(key, fp, []byte("done"))
		}},
		{"PurgeInFlightForced", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			info, err := e.inspector().Purge(e.ctx, key, store.PurgeOptions{InFlight: true})
			e.ok("Purge of an in-flight entry with InFlight", err)
			if info.State != store.StateInFlight || info.Data != nil {
				t.Fatalf("Purge returned %s data=%s, want the in-flight entry it purged", info.State, head(info.Data))
			}
			// The original owner has lost its claim, as after its lease ran
			// out: its outcome is refused, and nothing is left to release.
			e.refusedFree("the purged owner's token", key, tok)
			fp2 := fingerprint()
			newTok := e.claimWin(key, fp2, longTTL)
			e.refusedAll("the purged owner's token", key, tok)
			e.complete(key, newTok, []byte("second run"))
			e.wantCompleted(key, fp2, []byte("second run"))
		}},
		{"PurgeInFlightOnCompleted", func(t *testing.T, e *env) {
			// Asked for an in-flight entry that completed since: its
			// outcome stays, or a retry would run the handler again.
			key, fp := e.key(), fingerprint()
			e.complete(key, e.claimWin(key, fp, longTTL), []byte("done"))
			info, err := e.inspector().Purge(e.ctx, key, store.PurgeOptions{InFlight: true})
			e.wantErr("Purge with InFlight of a completed entry", err, store.ErrChanged)
			if info.State != store.StateCompleted {
				t.Fatalf("refused Purge returned %s, want the completed entry it found", info.State)
			}
			e.wantCompleted(key, fp, []byte("done"))
		}},
		{"PurgeFencedByToken", func(t *testing.T, e *env) {
			// An operator looks at a key, and purges it by its Token; the
			// key is purged and completed again by someone else meanwhile.
			in := e.inspector()
			key := e.key()
			e.complete(key, e.claimWin(key, fingerprint(), longTTL), []byte("first"))
			looked := e.lookup(key)
			_, err := in.Purge(e.ctx, key, store.PurgeOptions{})
			e.ok("Purge", err)
			fp := fingerprint()
			e.complete(key, e.claimWin(key, fp, longTTL), []byte("second"))
			for _, token := range []string{looked.Token, "storetest-not-a-token"} {
				info, err := in.Purge(e.ctx, key, store.PurgeOptions{Token: token})
				e.wantErr("Purge fenced by the token of an entry purged since", err, store.ErrChanged)
				if !bytes.Equal(info.Data, []byte("second")) {
					t.Fatalf("refused Purge returned data %s, want the entry it found", head(info.Data))
				}
				e.wantCompleted(key, fp, []byte("second"))
			}
			// Fenced by the token of the entry there now, it goes.
			_, err = in.Purge(e.ctx, key, store.PurgeOptions{Token: e.lookup(key).Token})
			e.ok("Purge fenced by the entry's own Token", err)
			e.wantFree(key)
		}},
		{"PurgeRacesComplete", purgeRacesComplete},
		{"PurgeRacesPurge", purgeRacesPurge},
	}
}

// purgeRacesComplete runs a forced Purge of an in-flight entry, fenced by
// its Token, against its owner's Complete: first the Purge after the
// Complete returned, then the Complete after the Purge returned, then both
// at once, again and again. The first two orders are forced by channels,
// not left to the scheduler, so both are checked on every run. Exactly one
// of the two lands, and the key ends as that one left it (completed with
// the owner's data, or free).
func purgeRacesComplete(t *testing.T, e *env) {
	const completeFirst, purgeFirst = 0, 1 // the runs that force an order
	in := e.inspector()
	for i := range 50 {
		key, fp := e.key(), fingerprint()
		tok := e.claimWin(key, fp, longTTL)
		fence := e.lookup(key).Token
		var completeErr, purgeErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		completeStart, purgeStart := start, start
		completeDone, purgeDone := make(chan struct{}), make(chan struct{})
		order := "at once"
		switch i {
		case completeFirst:
			purgeStart, order = completeDone, "after the Complete returned"
		case purgeFirst:
			completeStart, order = purgeDone, "before the Complete"
		}
		wg.Go(func() {
			defer close(completeDone)
			<-completeStart
			completeErr = e.s.Complete(e.ctx, key, tok, []byte("done"), longTTL)
		})
		wg.Go(func() {
			defer close(purgeDone)
			<-purgeStart
			_, purgeErr = in.Purge(e.ctx, key, store.PurgeOptions{InFlight: true, Token: fence})
		})
		close(start)
		wg.Wait()
		switch {
		case i != purgeFirst && completeErr == nil && errors.Is(purgeErr, store.ErrChanged):
			e.wantCompleted(key, fp, []byte("done"))
		case i != completeFirst && purgeErr == nil && errors.Is(completeErr, store.ErrLeaseLost):
			e.wantFree(key)
		default:
			t.Fatalf("a Complete and a forced Purge %s: Complete %v, Purge %v; want the one that ran first to land and the other refused", order, completeErr, purgeErr)
		}
	}
}

// purgeRacesPurge purges one completed key from many goroutines at once:
// exactly one purges it, the others find nothing.
func purgeRacesPurge(t *testing.T, e *env) {
	const n = 32
	in := e.inspector()
	key := e.key()
	e.complete(key, e.claimWin(key, fingerprint(), longTTL), []byte("done"))
	fence := e.lookup(key).Token
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = in.Purge(e.ctx, key, store.PurgeOptions{Token: fence})
		})
	}
	close(start)
	wg.Wait()
	purged := 0
	for i, err := range errs {
		switch {
		case err == nil:
			purged++
		case !errors.Is(err, store.ErrNotFound):
			t.Fatalf("purge %d: %v, want nil or store.ErrNotFound", i, err)
		}
	}
	if purged != 1 {
		t.Fatalf("%d of %d concurrent purges of one entry purged it, want 1", purged, n)
	}
	e.wantFree(key)
}
