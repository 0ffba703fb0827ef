package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

// cancelled returns a context that is already cancelled.
func (e *env) cancelled() context.Context {
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	return ctx
}

// honoured reports whether a store honoured a cancelled context: it fails
// the case when err is neither nil nor context.Canceled.
func (e *env) honoured(op string, err error) bool {
	e.t.Helper()
	if err != nil && !errors.Is(err, context.Canceled) {
		e.t.Fatalf("%s with a cancelled context: got %v, want nil or an error matching context.Canceled", op, err)
	}
	return err != nil
}

func contextCases() []testCase {
	return []testCase{
		{"CancelledClaim", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			c, err := e.s.Claim(e.cancelled(), key, fp, longTTL, store.ClaimOptions{})
			if e.honoured("Claim", err) {
				e.wantFree(key) // it claimed nothing
				return
			}
			if !c.Won() {
				t.Fatalf("Claim of a free key with a cancelled context returned nil error but did not win: %s", describe(c.Existing))
			}
			e.wantInFlight(key, fp)
			e.complete(key, c.Token, []byte("x"))
		}},
		{"CancelledComplete", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			if e.honoured("Complete", e.s.Complete(e.cancelled(), key, tok, []byte("x"), longTTL)) {
				e.wantInFlight(key, fp)
				e.complete(key, tok, []byte("y"))
				e.wantCompleted(key, fp, []byte("y"))
				return
			}
			e.wantCompleted(key, fp, []byte("x"))
		}},
		{"CancelledRelease", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			if e.honoured("Release", e.s.Release(e.cancelled(), key, tok)) {
				e.wantInFlight(key, fp)
				e.ok("Release", e.s.Release(e.ctx, key, tok))
			}
			e.wantFree(key)
		}},
		{"CancelledExtend", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.honoured("Extend", e.s.Extend(e.cancelled(), key, tok, longTTL))
			// Either way the owner still owns it.
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("x"))
		}},
		{"CancelledStaleToken", func(t *testing.T, e *env) {
			// A cancelled context never turns a refusal into success.
			key, fp := e.key(), fingerprint()
			e.claimWin(key, fp, longTTL)
			ctx := e.cancelled()
			for op, err := range map[string]error{
				"Complete": e.s.Complete(ctx, key, "storetest-not-a-token", []byte("x"), longTTL),
				"Extend":   e.s.Extend(ctx, key, "storetest-not-a-token", longTTL),
				"Release":  e.s.Release(ctx, key, "storetest-not-a-token"),
			} {
				if err == nil {
					t.Fatalf("%s with a foreign token and a cancelled context returned nil", op)
				}
				if !errors.Is(err, context.Canceled) {
					e.wantLeaseLost(op+" with a foreign token and a cancelled context", err)
				}
			}
			e.wantInFlight(key, fp)
		}},
	}
}
