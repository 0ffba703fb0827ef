package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// Sealed records (WithSealing) against a hostile store writer, a caller
// who shapes its fingerprint, and keys that change mid-call.

// A store writer who holds no key replaces a sealed record by an unsealed
// one under the entry's keyed fingerprint, read from the store: an entry
// of a keyed fingerprint holds a sealed record, so the unsealed one is
// refused as corrupt, without RequireSealed too (decision 234).
func TestHostileSealedUnsealedRecordUnderKeyedFingerprint(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k1", 1)))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "charge", Amount: 4200}
	first, _, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil {
		t.Fatal(err)
	}
	victim := entry(t, srv, st, "acme", "order-1")

	// The forger: a server with no keys, over a store of its own, whose
	// fingerprint is the victim entry's keyed fingerprint, read from the
	// store. Its record is an ordinary unsealed record for the same store
	// key, holding that fingerprint and a forged answer.
	forgeStore := memStore(t)
	forger := idempotency.NewServer(forgeStore, idempotency.WithScope(sealTenantScope),
		idempotency.WithFingerprint(func(string, proto.Message) ([]byte, error) { return bytes.Clone(victim.Fingerprint), nil }))
	if _, _, err := idempotency.Do(ctx, forger, sealOp, "order-1", req, func(context.Context) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: "FORGED: refund to attacker", Amount: 999999}, nil
	}); err != nil {
		t.Fatal(err)
	}
	forged := entry(t, forger, forgeStore, "acme", "order-1")
	if forged.Key != victim.Key {
		t.Fatalf("store keys differ: %s, %s", forged.Key, victim.Key)
	}
	if _, sealed := idempotency.SealedBy(forged.Data); sealed {
		t.Fatal("the forged record is sealed")
	}
	rewrite(t, st, victim.Key, victim.Fingerprint, forged.Data)

	got, replayed, err := ch.charge(ctx, srv, "order-1", req)
	if !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("unsealed record under a keyed fingerprint: got %v (replayed %v, err %v), want ErrRecordCorrupt; the original answer was %v",
			got, replayed, err, first)
	}
	if n := ch.runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
}

// A caller whose fingerprint function's output it shapes (here, a
// request field) sends another entry's keyed fingerprint, read from the
// store, as its request's unkeyed one: a fingerprint that names a key of
// the keyring is compared keyed only, so the call is another request's
// (ErrKeyReused) and gets no answer of the other entry (decision 234).
func TestHostileSealedRawFingerprintMatchesKeyed(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k1", 1)),
		idempotency.WithFingerprint(func(_ string, m proto.Message) ([]byte, error) {
			return []byte(m.(*testingv1.DoRequest).GetRequestId()), nil
		}))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	victimReq := &testingv1.DoRequest{Payload: "charge", Amount: 4200, RequestId: "victim-request"}
	if _, _, err := ch.charge(ctx, srv, "order-1", victimReq); err != nil {
		t.Fatal(err)
	}
	keyed := entry(t, srv, st, "acme", "order-1").Fingerprint
	other := &testingv1.DoRequest{Payload: "other", Amount: 1, RequestId: string(keyed)}
	got, replayed, err := ch.charge(ctx, srv, "order-1", other)
	if !errors.Is(err, idempotency.ErrKeyReused) && !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("another request whose unkeyed fingerprint is the entry's keyed one: got %v (replayed %v, err %v), want ErrKeyReused (or at least no answer)",
			got, replayed, err)
	}
}

// A primary key that changes between a call and a Do nested in its work
// (TenantKeys during step 2 of a rotation) still lets the nested Do of
// the same operation, key and request pass through under the claim: the
// nested check compares unkeyed fingerprints (decision 233).
func TestHostileSealedNestedDoAcrossRotation(t *testing.T) {
	t.Parallel()
	for _, shape := range sealedShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			testSealedNestedDoAcrossRotation(t, shape.payload, shape.opts)
		})
	}
}

func testSealedNestedDoAcrossRotation(t *testing.T, payload string, opts []idempotency.ServerOption) {
	k1, k2 := sealingKey("k1", 1), sealingKey("k2", 2)
	before, after := idempotency.NewKeyring(k1, k2), idempotency.NewKeyring(k2, k1)
	var calls atomic.Int64
	srv := idempotency.NewServer(memStore(t), append([]idempotency.ServerOption{idempotency.WithScope(sealTenantScope),
		idempotency.WithSealing(idempotency.Sealing{TenantKeys: func(context.Context, string) (*idempotency.Keyring, error) {
			if calls.Add(1) == 1 {
				return before, nil
			}
			return after, nil
		}})}, opts...)...)
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: payload, Amount: 1}
	var innerRan bool
	var innerErr error
	_, _, err := idempotency.Do(ctx, srv, sealOp, "order-1", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
		_, _, innerErr = idempotency.Do(ctx, srv, sealOp, "order-1", req, func(context.Context) (*testingv1.DoResponse, error) {
			innerRan = true
			return &testingv1.DoResponse{Payload: "inner"}, nil
		})
		return &testingv1.DoResponse{Payload: "outer"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !innerRan || innerErr != nil {
		t.Errorf("the same request nested across a key rotation: ran %v, err %v; want it to pass through", innerRan, innerErr)
	}
}

// A Keyring not made by NewKeyring (its zero value) has no key: sealing
// with it would seal under a key anyone derives. WithSealing refuses it
// at construction, naming the option; a TenantKeys that returns one fails
// the call before its function runs.
func TestHostileSealingZeroKeyring(t *testing.T) {
	t.Parallel()
	t.Run("Keys", func(t *testing.T) {
		t.Parallel()
		defer func() {
			if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "WithSealing") {
				t.Errorf("panic %v, want one naming WithSealing", v)
			}
		}()
		idempotency.NewServer(memStore(t), idempotency.WithSealing(idempotency.Sealing{Keys: new(idempotency.Keyring)}))
	})
	t.Run("TenantKeys", func(t *testing.T) {
		t.Parallel()
		srv := idempotency.NewServer(memStore(t), idempotency.WithScope(sealTenantScope), idempotency.WithSealing(idempotency.Sealing{
			TenantKeys: func(context.Context, string) (*idempotency.Keyring, error) { return new(idempotency.Keyring), nil },
		}))
		var ch charger
		_, _, err := ch.charge(asTenant(t.Context(), "acme"), srv, "order-1", &testingv1.DoRequest{Amount: 1})
		if err == nil || !strings.Contains(err.Error(), "NewKeyring") || ch.runs.Load() != 0 {
			t.Errorf("a zero Keyring from TenantKeys: %v after %d runs; want an error naming NewKeyring, no run", err, ch.runs.Load())
		}
	})
}

// A server without sealing, whose fingerprint function's output happens
// to have the shape of a keyed fingerprint (0x02, a length n, n bytes, 32
// bytes), answers another request with the key ErrKeyReused, as before
// sealing existed, not as a corrupt record.
func TestHostileUnsealedFingerprintShapedAsKeyed(t *testing.T) {
	t.Parallel()
	srv := idempotency.NewServer(memStore(t), idempotency.WithFingerprint(func(_ string, m proto.Message) ([]byte, error) {
		return []byte(m.(*testingv1.DoRequest).GetRequestId()), nil
	}))
	var ch charger
	ctx := t.Context()
	shaped := append([]byte{2, 1, 'x'}, bytes.Repeat([]byte{7}, 32)...)
	if _, _, err := ch.charge(ctx, srv, "order-1", &testingv1.DoRequest{RequestId: string(shaped)}); err != nil {
		t.Fatal(err)
	}
	_, _, err := ch.charge(ctx, srv, "order-1", &testingv1.DoRequest{RequestId: "another request"})
	if !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("another request with the key: got %v, want ErrKeyReused", err)
	}
}

// Concurrency over the derived-key cache: TenantKeys returning a fresh
// *Keyring per call (same secrets) over many scopes, so that the cache
// passes 4096 derivations and is cleared under load, with a replay cache
// and waiting for in-flight duplicates. Every (tenant, key) runs once and
// every caller gets the first answer. Run with -race.
func TestHostileSealedDerivedCacheChurn(t *testing.T) {
	t.Parallel()
	secret := sealingKey("k1", 1)
	srv := idempotency.NewServer(memStore(t), idempotency.WithScope(sealTenantScope),
		idempotency.WithReplayCache(256, 1<<20, time.Hour), idempotency.WithWaitForInFlight(time.Minute),
		idempotency.WithSealing(idempotency.Sealing{TenantKeys: func(context.Context, string) (*idempotency.Keyring, error) {
			return idempotency.NewKeyring(secret), nil
		}}))
	t.Cleanup(func() { _ = srv.Close() })
	const workers, perWorker, tenants, keys = 4, 1100, 40, 10
	var ch charger
	var mu sync.Mutex
	first := map[string]*testingv1.DoResponse{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				n := (i*7 + w) % (tenants * keys)
				tenant, key := fmt.Sprint("t", n/keys), fmt.Sprint("k", n%keys)
				resp, _, err := ch.charge(asTenant(t.Context(), tenant), srv, key, &testingv1.DoRequest{Payload: tenant, Amount: int64(n)})
				if err != nil {
					t.Errorf("%s/%s: %v", tenant, key, err)
					return
				}
				mu.Lock()
				id := tenant + "/" + key
				if f, ok := first[id]; !ok {
					first[id] = resp
				} else if !proto.Equal(f, resp) {
					t.Errorf("%s: %v, then %v", id, f, resp)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n, want := ch.runs.Load(), int64(len(first)); n != want {
		t.Errorf("the function ran %d times for %d keys", n, want)
	}
}

// A sealing server keys the default fingerprint's input, and a custom
// fingerprint function's output (decision 231): two sealing servers of
// one store and keyring, one with the default and one with a custom
// function that returns Fingerprint's fingerprint, key one request apart.
// The second refuses the first's entry as another request's; nothing runs
// twice.
func TestHostileSealedCustomFingerprintKeysApart(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	kr := idempotency.NewKeyring(sealingKey("k1", 1))
	def := sealedServer(st, kr)
	custom := sealedServer(st, kr, idempotency.WithFingerprint(idempotency.Fingerprint))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "charge", Amount: 1}
	if _, _, err := ch.charge(ctx, def, "order-1", req); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ch.charge(ctx, custom, "order-1", req); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("the default's entry through a custom fingerprint function: got %v, want ErrKeyReused", err)
	}
	if _, replayed, err := ch.charge(ctx, def, "order-1", req); err != nil || !replayed {
		t.Errorf("the default's entry through the default: replayed %v, %v", replayed, err)
	}
	if n := ch.runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
}

// claimHookStore runs onClaim, when set, before each claim of the store
// it wraps.
type claimHookStore struct {
	store.Store
	onClaim func()
}

func (s *claimHookStore) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration) (store.ClaimResult, error) {
	if s.onClaim != nil {
		s.onClaim()
	}
	return s.Store.Claim(ctx, key, fingerprint, lease)
}

// A request changed after the call took it (another call sharing the
// message changes it) does not change what the call checks an older key's
// fingerprint against: the call keys a copy of its input, taken before it
// claims, so a retry of a long request, its entry keyed by a key rotated
// out of primary, replays (decision 231).
func TestHostileSealedRequestChangedAfterPrepare(t *testing.T) {
	t.Parallel()
	k1, k2 := sealingKey("k1", 1), sealingKey("k2", 2)
	before, after := idempotency.NewKeyring(k1, k2), idempotency.NewKeyring(k2, k1)
	var calls atomic.Int64
	st := &claimHookStore{Store: memStore(t)}
	srv := idempotency.NewServer(st, idempotency.WithScope(sealTenantScope),
		idempotency.WithSealing(idempotency.Sealing{TenantKeys: func(context.Context, string) (*idempotency.Keyring, error) {
			if calls.Add(1) == 1 {
				return before, nil
			}
			return after, nil
		}}))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: strings.Repeat("charge ", 100), Amount: 1}
	first, _, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil {
		t.Fatal(err)
	}
	st.onClaim = func() { req.Amount = 99 }
	got, replayed, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil || !replayed || !proto.Equal(got, first) {
		t.Errorf("the request changed after the call took it: %v, replayed %v, %v; want the first answer replayed", got, replayed, err)
	}
	if n := ch.runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
}
