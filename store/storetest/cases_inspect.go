package storetest

import (
	"bytes"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

// inspectCases are the cases of store.Inspector, which every store
// implements (see WithoutInspection): Lookup and Stats here, Purge in
// cases_purge.go, List in cases_list.go.
func inspectCases() []testCase {
	cases := []testCase{
		{"LookupFreeKey", func(t *testing.T, e *env) {
			_, err := e.inspector().Lookup(e.ctx, e.key())
			e.wantErr("Lookup of a key never claimed", err, store.ErrNotFound)
		}},
		{"LookupInFlight", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			var tok string
			claimed := around(func() { tok = e.claimWin(key, fp, longTTL) })
			info := e.lookup(key)
			e.wantInfo("Lookup of an in-flight entry", info, store.StateInFlight, fp, nil, claimed, span{}, longTTL)
			// Looking changes nothing: the owner completes as usual.
			e.complete(key, tok, []byte("done"))
			e.wantCompleted(key, fp, []byte("done"))
		}},
		{"LookupCompleted", func(t *testing.T, e *env) {
			key, fp, data := e.key()+"\x00\xff", fingerprint(), randomData(300)
			var tok string
			claimed := around(func() { tok = e.claimWin(key, fp, longTTL) })
			completed := around(func() { e.complete(key, tok, data) })
			info := e.lookup(key)
			e.wantInfo("Lookup of a completed entry", info, store.StateCompleted, fp, data, claimed, completed, longTTL)
			if !info.Completed.IsZero() && !info.Claimed.IsZero() && info.Completed.Before(info.Claimed) {
				t.Fatalf("Completed %v is before Claimed %v", info.Completed, info.Claimed)
			}
		}},
		{"LookupCopies", func(t *testing.T, e *env) {
			key, fp, data := e.key(), fingerprint(), []byte("stored outcome")
			e.complete(key, e.claimWin(key, fp, longTTL), data)
			info := e.lookup(key)
			info.Fingerprint[0] ^= 0xff
			info.Data[0] ^= 0xff
			e.wantCompleted(key, fp, data)
			if again := e.lookup(key); !bytes.Equal(again.Data, data) || !bytes.Equal(again.Fingerprint, fp) {
				t.Fatalf("a change to the Info of one Lookup shows in the next: data %s fingerprint %s", head(again.Data), head(again.Fingerprint))
			}
		}},
		{"LookupTokenNamesTheClaim", func(t *testing.T, e *env) {
			// Two claims of one key, one after the other, are two entries
			// with two tokens; a claim's token stays once it completes.
			key := e.key()
			old := e.claimWin(key, fingerprint(), longTTL)
			first := e.lookup(key).Token
			e.ok("Release with the owner token", e.s.Release(e.ctx, key, old))
			tok := e.claimWin(key, fingerprint(), longTTL)
			second := e.lookup(key).Token
			if second == first {
				t.Fatalf("two claims of %q have the same Token %q", key, first)
			}
			e.complete(key, tok, []byte("done"))
			if done := e.lookup(key).Token; done != second {
				t.Fatalf("Token %q of the claim became %q once it completed", second, done)
			}
		}},
		{"ExpiredIsNotFound", func(t *testing.T, e *env) {
			in := e.inspector()
			leased, kept := e.key(), e.key()
			e.claimWin(leased, fingerprint(), e.lease)
			e.ok("Complete", e.s.Complete(e.ctx, kept, e.claimWin(kept, fingerprint(), longTTL), []byte("x"), e.retention))
			sleepPast(max(e.lease, e.retention))
			for _, key := range []string{leased, kept} {
				_, err := in.Lookup(e.ctx, key)
				e.wantErr("Lookup of an expired entry", err, store.ErrNotFound)
				_, err = in.Purge(e.ctx, key, store.PurgeOptions{InFlight: key == leased})
				e.wantErr("Purge of an expired entry", err, store.ErrNotFound)
			}
			if got := e.walk(e.t.Name()+"/", store.ListOptions{}); len(got) != 0 {
				t.Fatalf("List shows %d expired entries, first %q", len(got), got[0].Key)
			}
		}},
		{"Stats", func(t *testing.T, e *env) {
			in := e.inspector()
			flying, done := e.key(), e.key()
			fp, data := fingerprint(), randomData(1000)
			e.claimWin(flying, fp, longTTL)
			e.complete(done, e.claimWin(done, fp, longTTL), data)
			st, err := in.Stats(e.ctx)
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			if st.InFlight.Entries < 0 || st.InFlight.Bytes < 0 || st.Completed.Entries < 0 || st.Completed.Bytes < 0 {
				t.Fatalf("Stats = %+v: negative", st)
			}
			if st.Estimated {
				t.Logf("Stats = %+v, estimated: not checked further", st)
				return
			}
			// The store may be shared with other cases: at least ours.
			wantIn, wantDone := e.lookup(flying).Size, e.lookup(done).Size
			if st.InFlight.Entries < 1 || st.InFlight.Bytes < wantIn || st.Completed.Entries < 1 || st.Completed.Bytes < wantDone {
				t.Fatalf("Stats = %+v; want at least 1 in-flight entry of %d bytes and 1 completed entry of %d bytes", st, wantIn, wantDone)
			}
		}},
	}
	cases = append(cases, purgeCases()...)
	return append(cases, listCases()...)
}
