package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// deliveryTimeout bounds the wait for an invalidation: a store that does
// not deliver fails after it, one that does passes as soon as it arrives.
const deliveryTimeout = 10 * time.Second

// invalidator returns the store as a store.Invalidator and a subscription
// to it, or skips the case for a store that is not one (invalidation is
// optional: a store that cannot carry it states its bound instead).
func (e *env) invalidator() (store.Inspector, <-chan store.Invalidation) {
	e.t.Helper()
	in := e.inspector()
	inv, ok := e.s.(store.Invalidator)
	if !ok {
		e.t.Skipf("%T does not implement store.Invalidator", e.s)
	}
	ch, err := inv.Invalidations(e.ctx)
	if err != nil {
		e.t.Fatalf("Invalidations: %v", err)
	}
	return in, ch
}

// nextOf returns the next invalidation of ch that names one of keys (the
// store may be shared with other cases, whose purges arrive too), or one
// with All set.
func (e *env) nextOf(ch <-chan store.Invalidation, keys ...string) store.Invalidation {
	e.t.Helper()
	timeout := time.After(deliveryTimeout)
	for {
		select {
		case inv, ok := <-ch:
			if !ok {
				e.t.Fatal("the Invalidations channel closed while the case was running")
			}
			if inv.All {
				return inv
			}
			for _, k := range keys {
				if inv.Key == k {
					return inv
				}
			}
		case <-timeout:
			e.t.Fatalf("no invalidation of %q within %v", keys, deliveryTimeout)
		}
	}
}

func invalidateCases() []testCase {
	return []testCase{
		{"PurgeIsDelivered", func(t *testing.T, e *env) {
			in, ch := e.invalidator()
			key := e.key() + "\x00\xff"
			e.complete(key, e.claimWin(key, fingerprint(), longTTL), []byte("done"))
			_, err := in.Purge(e.ctx, key, store.PurgeOptions{})
			e.ok("Purge", err)
			if inv := e.nextOf(ch, key); !inv.All && inv.Key != key {
				t.Fatalf("got %+v, want the purge of %q", inv, key)
			}
		}},
		{"RefusedPurgeIsNotDelivered", func(t *testing.T, e *env) {
			// A store delivers its purges in order: the refused purge of
			// the first key would arrive before the second key's.
			in, ch := e.invalidator()
			refused, purged := e.key(), e.key()
			e.claimWin(refused, fingerprint(), longTTL)
			e.complete(purged, e.claimWin(purged, fingerprint(), longTTL), []byte("done"))
			_, err := in.Purge(e.ctx, refused, store.PurgeOptions{})
			e.wantErr("Purge of an in-flight entry without InFlight", err, store.ErrInFlight)
			_, err = in.Purge(e.ctx, purged, store.PurgeOptions{})
			e.ok("Purge", err)
			if inv := e.nextOf(ch, refused, purged); inv.Key == refused {
				t.Fatalf("a refused purge of %q was delivered", refused)
			}
		}},
		{"ClosedWhenDone", func(t *testing.T, e *env) {
			e.inspector()
			inv, ok := e.s.(store.Invalidator)
			if !ok {
				t.Skipf("%T does not implement store.Invalidator", e.s)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			ch, err := inv.Invalidations(ctx)
			if err != nil {
				t.Fatalf("Invalidations: %v", err)
			}
			cancel()
			timeout := time.After(deliveryTimeout)
			for {
				select {
				case _, ok := <-ch:
					if !ok {
						return
					}
				case <-timeout:
					t.Fatalf("the channel is still open %v after its context ended", deliveryTimeout)
				}
			}
		}},
	}
}
