package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

// refusedAll calls Complete, Extend and Release with token on key, which
// holds an entry token does not own, and fails the case unless each
// returns store.ErrLeaseLost.
func (e *env) refusedAll(what, key, token string) {
	e.t.Helper()
	e.wantLeaseLost("Complete with "+what, e.s.Complete(e.ctx, key, token, []byte("intruder"), longTTL))
	e.wantLeaseLost("Extend with "+what, e.s.Extend(e.ctx, key, token, longTTL))
	e.wantLeaseLost("Release with "+what, e.s.Release(e.ctx, key, token))
}

// refusedFree calls Complete, Extend and Release with token on key, which
// holds no entry, and fails the case unless Complete and Extend return
// store.ErrLeaseLost and Release returns nil (nothing left to release).
// Callers check with wantFree that none of them created an entry.
func (e *env) refusedFree(what, key, token string) {
	e.t.Helper()
	e.wantLeaseLost("Complete with "+what, e.s.Complete(e.ctx, key, token, []byte("intruder"), longTTL))
	e.wantLeaseLost("Extend with "+what, e.s.Extend(e.ctx, key, token, longTTL))
	if err := e.s.Release(e.ctx, key, token); err != nil {
		e.t.Fatalf("Release with %s: %v, want nil: nothing is left to release", what, err)
	}
}

func tokenCases() []testCase {
	return []testCase{
		{"ForeignTokenChangesNothing", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			other := e.key()
			otherTok := e.claimWin(other, fingerprint(), longTTL)
			for _, bad := range []struct{ what, token string }{
				{"an empty token", ""},
				{"a made-up token", "storetest-not-a-token"},
				{"the owner token with a suffix", tok + "0"},
				{"a prefix of the owner token", tok[:len(tok)-1]},
				{"the token of another key", otherTok},
			} {
				if bad.token == tok {
					continue // a one-character token has no distinct prefix
				}
				e.refusedAll(bad.what, key, bad.token)
				e.wantInFlight(key, fp)
			}
			// The owner still owns it.
			e.ok("Extend with the owner token", e.s.Extend(e.ctx, key, tok, longTTL))
			e.complete(key, tok, []byte("owner"))
			e.wantCompleted(key, fp, []byte("owner"))
		}},
		{"StaleTokenChangesNothing", func(t *testing.T, e *env) {
			key := e.key()
			old := e.claimWin(key, fingerprint(), longTTL)
			e.ok("Release with the owner token", e.s.Release(e.ctx, key, old))
			fp := fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			if tok == old {
				t.Fatalf("reclaim after release reused token %q", tok)
			}
			e.refusedAll("the previous owner's token", key, old)
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("new owner"))
			e.refusedAll("the previous owner's token", key, old)
			e.wantCompleted(key, fp, []byte("new owner"))
		}},
		{"CompletedRefusesEveryToken", func(t *testing.T, e *env) {
			// Every token is refused, but for the one that completed the
			// entry, whose Complete is a no-op (a resend after a lost reply).
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, []byte("done"))
			e.ok("Complete again with the token that completed it", e.s.Complete(e.ctx, key, tok, []byte("intruder"), longTTL))
			e.wantLeaseLost("Extend with the token that completed it", e.s.Extend(e.ctx, key, tok, longTTL))
			e.wantLeaseLost("Release with the token that completed it", e.s.Release(e.ctx, key, tok))
			e.refusedAll("an empty token", key, "")
			e.refusedAll("a made-up token", key, "storetest-not-a-token")
			e.wantCompleted(key, fp, []byte("done"))
		}},
		{"FreeKeyRefusesEveryToken", func(t *testing.T, e *env) {
			key := e.key()
			e.refusedFree("a made-up token on a free key", key, "storetest-not-a-token")
			e.refusedFree("an empty token on a free key", key, "")
			e.wantFree(key)
		}},
		{"TokensAreUnique", func(t *testing.T, e *env) {
			seen := map[string]string{}
			add := func(tok, where string) {
				t.Helper()
				if tok == "" {
					t.Fatalf("%s: empty token", where)
				}
				if prev, dup := seen[tok]; dup {
					t.Fatalf("token %q issued twice: %s and %s", tok, prev, where)
				}
				seen[tok] = where
			}
			// One key claimed and released over and over.
			key := e.key()
			for i := range 50 {
				tok := e.claimWin(key, fingerprint(), longTTL)
				add(tok, fmt.Sprintf("reclaim %d", i))
				e.ok("Release", e.s.Release(e.ctx, key, tok))
			}
			// Many keys claimed at once.
			const workers, perWorker = 8, 25
			toks := make([][]string, workers)
			errs := make(chan error, workers*perWorker)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for range perWorker {
						c, err := e.s.Claim(e.ctx, e.key(), fingerprint(), longTTL, store.ClaimOptions{})
						if err != nil || !c.Won() {
							errs <- fmt.Errorf("claim of a fresh key: won=%v err=%v", c.Won(), err)
							continue
						}
						toks[w] = append(toks[w], c.Token)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for w, ts := range toks {
				for i, tok := range ts {
					add(tok, fmt.Sprintf("concurrent claim %d/%d", w, i))
				}
			}
			if len(seen) != 50+workers*perWorker {
				t.Fatalf("got %d tokens, want %d", len(seen), 50+workers*perWorker)
			}
		}},
	}
}

func releaseCases() []testCase {
	return []testCase{
		{"FreesKey", func(t *testing.T, e *env) {
			key := e.key()
			tok := e.claimWin(key, fingerprint(), longTTL)
			e.ok("Release with the owner token", e.s.Release(e.ctx, key, tok))
			next := e.wantFree(key)
			if next == tok {
				t.Fatalf("claim after release got the released token %q again", tok)
			}
		}},
		{"SecondReleaseIsANoOp", func(t *testing.T, e *env) {
			// A Release resent after the first one landed (its reply was
			// lost) finds nothing left to release: nil, not a lost lease.
			// Complete and Extend after the Release are still refused.
			key := e.key()
			tok := e.claimWin(key, fingerprint(), longTTL)
			e.ok("Release with the owner token", e.s.Release(e.ctx, key, tok))
			e.refusedFree("the token of a released claim", key, tok)
			e.wantFree(key)
		}},
		{"FreeKeyIsANoOp", func(t *testing.T, e *env) {
			// A key never claimed holds nothing to release, whatever the
			// token; the Release creates nothing.
			key := e.key()
			for _, tok := range []string{"storetest-not-a-token", "1", ""} {
				e.ok("Release of a key never claimed", e.s.Release(e.ctx, key, tok))
			}
			e.wantFree(key)
		}},
		{"OtherOwnerUntouched", func(t *testing.T, e *env) {
			// A Release with a token that owned the key before is refused
			// while another owner holds it, in flight and completed, and
			// leaves that owner's entry as it was.
			key := e.key()
			old := e.claimWin(key, fingerprint(), longTTL)
			e.ok("Release with the owner token", e.s.Release(e.ctx, key, old))
			fp := fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.wantLeaseLost("Release with the previous owner's token", e.s.Release(e.ctx, key, old))
			e.wantInFlight(key, fp)
			e.ok("Extend with the new owner's token", e.s.Extend(e.ctx, key, tok, longTTL))
			e.complete(key, tok, []byte("new owner"))
			e.wantLeaseLost("Release with the previous owner's token after Complete", e.s.Release(e.ctx, key, old))
			e.wantCompleted(key, fp, []byte("new owner"))
		}},
		{"AfterCompleteRefused", func(t *testing.T, e *env) {
			// A completed entry is never released, not even by the token
			// that completed it, nor by any other.
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, []byte("kept"))
			for _, bad := range []struct{ what, token string }{
				{"the token that completed it", tok},
				{"a made-up token", "storetest-not-a-token"},
				{"an empty token", ""},
			} {
				e.wantLeaseLost("Release after Complete with "+bad.what, e.s.Release(e.ctx, key, bad.token))
			}
			e.wantCompleted(key, fp, []byte("kept"))
		}},
	}
}

func extendCases() []testCase {
	return []testCase{
		{"KeepsEntry", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			for range 3 {
				e.ok("Extend with the owner token", e.s.Extend(e.ctx, key, tok, longTTL))
			}
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("after extend"))
			e.wantCompleted(key, fp, []byte("after extend"))
		}},
		{"AfterCompleteRefused", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.complete(key, tok, []byte("kept"))
			e.wantLeaseLost("Extend after Complete", e.s.Extend(e.ctx, key, tok, longTTL))
			e.wantCompleted(key, fp, []byte("kept"))
		}},
		{"FreeKeyNotCreated", func(t *testing.T, e *env) {
			key := e.key()
			e.wantLeaseLost("Extend of a free key", e.s.Extend(e.ctx, key, "1", longTTL))
			e.wantFree(key)
		}},
	}
}
