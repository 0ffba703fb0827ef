package idempotency_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/adminhook"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// sealOp is the operation the sealing tests run under Do.
const sealOp = "payments.charge"

// secretPayload is what a charge answers: no store dump may hold it.
const secretPayload = "card-4242-4242-4242-4242 Jane Doe"

func sealingKey(id string, b byte) idempotency.SealingKey {
	return idempotency.SealingKey{ID: id, Secret: bytes.Repeat([]byte{b}, idempotency.SealingKeySize)}
}

type sealTenantKey struct{}

// sealTenantScope is a scope function: the tenant the context carries.
func sealTenantScope(ctx context.Context) (string, error) {
	s, _ := ctx.Value(sealTenantKey{}).(string)
	return s, nil
}

func asTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, sealTenantKey{}, tenant)
}

// sealedServer is a Server over st sealing with kr, whose scope is the
// context's tenant.
func sealedServer(st store.Store, kr *idempotency.Keyring, opts ...idempotency.ServerOption) *idempotency.Server {
	return idempotency.NewServer(st, append([]idempotency.ServerOption{
		idempotency.WithScope(sealTenantScope), idempotency.WithSealing(idempotency.Sealing{Keys: kr}),
	}, opts...)...)
}

// sealedShapes are the requests a sealing server keys each in its own way
// (decision 231): one whose fingerprint input the call keeps in its own
// state, two it keeps in an allocation of its own, and one of a custom
// fingerprint function (its fingerprint keyed). A test over them
// runs each shape's servers with opts.
var sealedShapes = []struct {
	name, payload string
	opts          []idempotency.ServerOption
}{
	{"inline", "charge", nil},
	{"kept", strings.Repeat("charge ", 20), nil},
	{"long", strings.Repeat("charge ", 100), nil},
	{"custom", "charge", []idempotency.ServerOption{idempotency.WithFingerprint(idempotency.Fingerprint)}},
}

// charger runs charges under Do and counts the function's runs.
type charger struct{ runs atomic.Int64 }

func (ch *charger) charge(ctx context.Context, srv *idempotency.Server, key string, req *testingv1.DoRequest) (*testingv1.DoResponse, bool, error) {
	return idempotency.Do(ctx, srv, sealOp, key, req, func(context.Context) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: secretPayload, Amount: req.GetAmount(), Execution: ch.runs.Add(1)}, nil
	})
}

// entry looks up the completed entry of key for tenant.
func entry(t *testing.T, srv *idempotency.Server, st *memorystore.Store, tenant, key string) store.Info {
	t.Helper()
	sk, err := srv.StoreKey(sealOp, tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Lookup(t.Context(), sk)
	if err != nil {
		t.Fatalf("lookup %s: %v", key, err)
	}
	return info
}

// rewrite replaces the entry under storeKey with a completed one holding
// fingerprint and data, as whoever can write to the store could.
func rewrite(t *testing.T, st *memorystore.Store, storeKey string, fingerprint, data []byte) {
	t.Helper()
	ctx := t.Context()
	if _, err := st.Purge(ctx, storeKey, store.PurgeOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	cl, err := st.Claim(ctx, storeKey, fingerprint, time.Minute, store.ClaimOptions{})
	if err != nil || !cl.Won() {
		t.Fatalf("claim %s: %v (won %v)", storeKey, err, cl.Won())
	}
	if err := st.Complete(ctx, storeKey, cl.Token, data, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// With sealing, the store holds neither the answer nor a fingerprint
// anyone without the key can compute, and a retry still gets the answer
// byte for byte.
func TestSealedStoreHoldsNoAnswer(t *testing.T) {
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
	info := entry(t, srv, st, "acme", "order-1")
	for _, secret := range []string{secretPayload, "card-4242", "Jane Doe", "DoResponse"} {
		if bytes.Contains(info.Data, []byte(secret)) {
			t.Errorf("the stored record holds %q", secret)
		}
	}
	if id, ok := idempotency.SealedBy(info.Data); !ok || id != "k1" {
		t.Errorf("SealedBy = %q, %v; want k1, true", id, ok)
	}
	unkeyed, err := idempotency.Fingerprint(sealOp, req)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(info.Fingerprint, unkeyed[1:]) {
		t.Errorf("the stored fingerprint holds the unkeyed one: %x", info.Fingerprint)
	}
	again, replayed, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil || !replayed {
		t.Fatalf("retry: replayed %v, err %v", replayed, err)
	}
	if !proto.Equal(first, again) || ch.runs.Load() != 1 {
		t.Errorf("retry got %v after %d runs, want %v after 1", again, ch.runs.Load(), first)
	}
}

// A sealed record with any byte flipped, or cut short, is refused as
// corrupt, never replayed and never run again.
func TestSealedRecordTampered(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k1", 1)))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "charge", Amount: 1}
	if _, _, err := ch.charge(ctx, srv, "order-1", req); err != nil {
		t.Fatal(err)
	}
	good := entry(t, srv, st, "acme", "order-1")
	var bad [][]byte
	for i := range good.Data {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(good.Data)
			b[i] ^= bit
			bad = append(bad, b)
		}
	}
	for _, n := range []int{0, 1, 4, 10, len(good.Data) / 2, len(good.Data) - 1} {
		bad = append(bad, bytes.Clone(good.Data[:n]))
	}
	bad = append(bad, append(bytes.Clone(good.Data), 0))
	for i, data := range bad {
		rewrite(t, st, good.Key, good.Fingerprint, data)
		resp, _, err := ch.charge(ctx, srv, "order-1", req)
		if !errors.Is(err, idempotency.ErrRecordCorrupt) {
			t.Fatalf("tampered record %d (%x): got %v, %v; want ErrRecordCorrupt", i, data, resp, err)
		}
	}
	if n := ch.runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
	rewrite(t, st, good.Key, good.Fingerprint, good.Data)
	if _, replayed, err := ch.charge(ctx, srv, "order-1", req); err != nil || !replayed {
		t.Errorf("the record put back: replayed %v, err %v", replayed, err)
	}
}

// A record moved to another key of the same tenant and request fails
// authentication: its associated data is its own store key.
func TestSealedRecordMoved(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k1", 1)))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "charge", Amount: 1}
	for _, key := range []string{"order-a", "order-b"} {
		if _, _, err := ch.charge(ctx, srv, key, req); err != nil {
			t.Fatal(err)
		}
	}
	a, b := entry(t, srv, st, "acme", "order-a"), entry(t, srv, st, "acme", "order-b")
	if !bytes.Equal(a.Fingerprint, b.Fingerprint) {
		t.Fatal("one tenant's one request has two fingerprints")
	}
	rewrite(t, st, b.Key, a.Fingerprint, a.Data)
	if _, _, err := ch.charge(ctx, srv, "order-b", req); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Fatalf("moved record: got %v, want ErrRecordCorrupt", err)
	}
	if n := ch.runs.Load(); n != 2 {
		t.Errorf("the function ran %d times, want 2", n)
	}
}

// One tenant's record under another tenant's key is refused: with its
// fingerprint, which is keyed per tenant, as another request's; in the
// other tenant's own entry, as corrupt.
func TestSealedRecordOtherTenant(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k1", 1)))
	var ch charger
	req := &testingv1.DoRequest{Payload: "charge", Amount: 1}
	for _, tenant := range []string{"acme", "globex"} {
		if _, _, err := ch.charge(asTenant(t.Context(), tenant), srv, "order-1", req); err != nil {
			t.Fatal(err)
		}
	}
	acme, globex := entry(t, srv, st, "acme", "order-1"), entry(t, srv, st, "globex", "order-1")
	if bytes.Equal(acme.Fingerprint, globex.Fingerprint) {
		t.Fatal("two tenants' fingerprints of one request are equal: not keyed per tenant")
	}
	ctx := asTenant(t.Context(), "globex")
	rewrite(t, st, globex.Key, acme.Fingerprint, acme.Data)
	if _, _, err := ch.charge(ctx, srv, "order-1", req); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("acme's entry under globex's key: got %v, want ErrKeyReused", err)
	}
	rewrite(t, st, globex.Key, globex.Fingerprint, acme.Data)
	if _, _, err := ch.charge(ctx, srv, "order-1", req); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("acme's record in globex's entry: got %v, want ErrRecordCorrupt", err)
	}
	if n := ch.runs.Load(); n != 2 {
		t.Errorf("the function ran %d times, want 2", n)
	}
}

// Keys rotate mid-traffic without losing an outcome: once every server
// holds the new key, servers sealing with the old key and servers sealing
// with the new one share a store, and every key runs once. Once the old
// key is dropped, its records are refused as corrupt and never run again;
// the new key's still replay.
func TestSealingKeyRotation(t *testing.T) {
	t.Parallel()
	for _, shape := range sealedShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			testSealingKeyRotation(t, shape.payload, shape.opts)
		})
	}
}

func testSealingKeyRotation(t *testing.T, payload string, opts []idempotency.ServerOption) {
	st := memStore(t)
	k1, k2, k3 := sealingKey("k1", 1), sealingKey("k2", 2), sealingKey("k3", 3)
	opts = append(opts[:len(opts):len(opts)], idempotency.WithWaitForInFlight(time.Minute))
	servers := []*idempotency.Server{
		sealedServer(st, idempotency.NewKeyring(k1, k2), opts...),
		sealedServer(st, idempotency.NewKeyring(k2, k1), opts...),
	}
	const keys, callers = 16, 8
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	first := make([]*testingv1.DoResponse, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				req := &testingv1.DoRequest{Payload: payload, Amount: int64(k)}
				resp, _, err := ch.charge(ctx, servers[(c+k)%2], fmt.Sprint("order-", k), req)
				if err != nil {
					t.Errorf("caller %d, key %d: %v", c, k, err)
					return
				}
				mu.Lock()
				if first[k] == nil {
					first[k] = resp
				} else if !proto.Equal(first[k], resp) {
					t.Errorf("key %d: %v, then %v", k, first[k], resp)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := ch.runs.Load(); n != keys {
		t.Fatalf("the function ran %d times for %d keys", n, keys)
	}
	sealedBy := map[string]int{}
	for k := range keys {
		id, _ := idempotency.SealedBy(entry(t, servers[0], st, "acme", fmt.Sprint("order-", k)).Data)
		sealedBy[id]++
	}
	if sealedBy["k1"] == 0 || sealedBy["k2"] == 0 || sealedBy["k1"]+sealedBy["k2"] != keys {
		t.Fatalf("records sealed by %v, want some by k1 and some by k2", sealedBy)
	}
	dropped := sealedServer(st, idempotency.NewKeyring(k3, k2), opts...)
	for k := range keys {
		key := fmt.Sprint("order-", k)
		id, _ := idempotency.SealedBy(entry(t, dropped, st, "acme", key).Data)
		resp, replayed, err := ch.charge(ctx, dropped, key, &testingv1.DoRequest{Payload: payload, Amount: int64(k)})
		switch id {
		case "k1":
			if !errors.Is(err, idempotency.ErrRecordCorrupt) {
				t.Errorf("%s, sealed by the dropped key: got %v, %v; want ErrRecordCorrupt", key, resp, err)
			}
		case "k2":
			if err != nil || !replayed || !proto.Equal(resp, first[k]) {
				t.Errorf("%s, sealed by a held key: got %v, replayed %v, %v", key, resp, replayed, err)
			}
		}
	}
	if n := ch.runs.Load(); n != keys {
		t.Errorf("the function ran %d times after the rotation, want %d", n, keys)
	}
}

// Turning sealing on keeps the records written before it replaying, until
// RequireSealed refuses them; turning it off refuses sealed records.
func TestSealingUpgrade(t *testing.T) {
	t.Parallel()
	for _, shape := range sealedShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			testSealingUpgrade(t, shape.payload, shape.opts)
		})
	}
}

func testSealingUpgrade(t *testing.T, payload string, opts []idempotency.ServerOption) {
	st := memStore(t)
	kr := idempotency.NewKeyring(sealingKey("k1", 1))
	plain := idempotency.NewServer(st, append([]idempotency.ServerOption{idempotency.WithScope(sealTenantScope)}, opts...)...)
	sealed := sealedServer(st, kr, opts...)
	strict := idempotency.NewServer(st, append([]idempotency.ServerOption{idempotency.WithScope(sealTenantScope),
		idempotency.WithSealing(idempotency.Sealing{Keys: kr, RequireSealed: true})}, opts...)...)
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: payload, Amount: 1}
	before, _, err := ch.charge(ctx, plain, "before", req)
	if err != nil {
		t.Fatal(err)
	}
	if _, sealedData := idempotency.SealedBy(entry(t, plain, st, "acme", "before").Data); sealedData {
		t.Fatal("a server without sealing sealed its record")
	}
	got, replayed, err := ch.charge(ctx, sealed, "before", req)
	if err != nil || !replayed || !proto.Equal(got, before) {
		t.Errorf("an earlier record through a sealing server: %v, replayed %v, %v", got, replayed, err)
	}
	if _, _, err := ch.charge(ctx, strict, "before", req); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("an earlier record with RequireSealed: got %v, want ErrKeyReused", err)
	}
	if _, _, err := ch.charge(ctx, sealed, "after", req); err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := ch.charge(ctx, strict, "after", req); err != nil || !replayed {
		t.Errorf("a sealed record with RequireSealed: replayed %v, %v", replayed, err)
	}
	if _, _, err := ch.charge(ctx, plain, "after", req); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("a sealed record through a server without sealing: got %v, want ErrRecordCorrupt", err)
	}
	// An unsealed record in a sealed entry's place is refused by a strict
	// server as corrupt.
	after := entry(t, sealed, st, "acme", "after")
	rewrite(t, st, after.Key, after.Fingerprint, entry(t, plain, st, "acme", "before").Data)
	if _, _, err := ch.charge(ctx, strict, "after", req); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("an unsealed record with RequireSealed: got %v, want ErrRecordCorrupt", err)
	}
	if n := ch.runs.Load(); n != 2 {
		t.Errorf("the function ran %d times, want 2", n)
	}
}

// Per-tenant keyrings: forgetting a tenant's keys makes its records
// unreadable (refused as corrupt, never run again) and leaves the others';
// an error of TenantKeys fails the call before anything runs, its gRPC
// status as it is.
func TestSealingTenantKeys(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	var mu sync.Mutex
	keyrings := map[string]*idempotency.Keyring{
		"acme":   idempotency.NewKeyring(sealingKey("acme-1", 1)),
		"globex": idempotency.NewKeyring(sealingKey("globex-1", 2)),
	}
	srv := idempotency.NewServer(st, idempotency.WithScope(sealTenantScope), idempotency.WithSealing(idempotency.Sealing{
		TenantKeys: func(_ context.Context, scope string) (*idempotency.Keyring, error) {
			mu.Lock()
			defer mu.Unlock()
			if kr, ok := keyrings[scope]; ok {
				return kr, nil
			}
			return nil, status.Error(codes.Unavailable, "key service down")
		},
	}))
	var ch charger
	req := &testingv1.DoRequest{Payload: "charge", Amount: 1}
	for _, tenant := range []string{"acme", "globex"} {
		if _, _, err := ch.charge(asTenant(t.Context(), tenant), srv, "order-1", req); err != nil {
			t.Fatal(err)
		}
	}
	if id, _ := idempotency.SealedBy(entry(t, srv, st, "globex", "order-1").Data); id != "globex-1" {
		t.Errorf("globex's record sealed by %q", id)
	}
	mu.Lock()
	keyrings["acme"] = idempotency.NewKeyring(sealingKey("acme-2", 3)) // acme's keys forgotten
	mu.Unlock()
	if _, _, err := ch.charge(asTenant(t.Context(), "acme"), srv, "order-1", req); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("a shredded tenant's record: got %v, want ErrRecordCorrupt", err)
	}
	if _, replayed, err := ch.charge(asTenant(t.Context(), "globex"), srv, "order-1", req); err != nil || !replayed {
		t.Errorf("another tenant's record: replayed %v, %v", replayed, err)
	}
	_, _, err := ch.charge(asTenant(t.Context(), "initech"), srv, "order-1", req)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "sealing keys") {
		t.Errorf("TenantKeys failing: got %v, want its UNAVAILABLE, naming the sealing keys", err)
	}
	if n := ch.runs.Load(); n != 2 {
		t.Errorf("the function ran %d times, want 2", n)
	}
}

// OpenRecord, package admin's way into a server (adminhook), gives an
// operator the record a sealed entry holds and the key that sealed it,
// and refuses it for another scope and on a server without sealing keys.
func TestOpenRecord(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k2", 2), sealingKey("k1", 1)))
	var ch charger
	if _, _, err := ch.charge(asTenant(t.Context(), "acme"), srv, "order-1", &testingv1.DoRequest{Amount: 1}); err != nil {
		t.Fatal(err)
	}
	info := entry(t, srv, st, "acme", "order-1")
	rec, id, err := adminhook.OpenRecord(srv, t.Context(), info.Key, "acme", info.Data)
	if err != nil || id != "k2" || !bytes.Contains(rec, []byte(secretPayload)) {
		t.Errorf("OpenRecord = %d bytes, %q, %v; want the record, k2", len(rec), id, err)
	}
	if _, id, err := adminhook.OpenRecord(srv, t.Context(), info.Key, "globex", info.Data); !errors.Is(err, idempotency.ErrRecordCorrupt) || id != "k2" {
		t.Errorf("OpenRecord for another scope = %q, %v; want k2, ErrRecordCorrupt", id, err)
	}
	plain := idempotency.NewServer(st)
	if _, id, err := adminhook.OpenRecord(plain, t.Context(), info.Key, "acme", info.Data); !errors.Is(err, idempotency.ErrRecordCorrupt) || id != "k2" {
		t.Errorf("OpenRecord without sealing keys = %q, %v; want k2, ErrRecordCorrupt", id, err)
	}
}

// A configuration error of sealing panics at construction, naming the
// option or the constructor.
func TestSealingConfigurationErrors(t *testing.T) {
	t.Parallel()
	k := sealingKey("k1", 1)
	for name, tc := range map[string]struct {
		build func()
		want  string
	}{
		"no keys":      {func() { idempotency.NewServer(memStore(t), idempotency.WithSealing(idempotency.Sealing{})) }, "WithSealing"},
		"empty ID":     {func() { idempotency.NewKeyring(idempotency.SealingKey{Secret: k.Secret}) }, "NewKeyring"},
		"long ID":      {func() { idempotency.NewKeyring(idempotency.SealingKey{ID: strings.Repeat("x", 65), Secret: k.Secret}) }, "NewKeyring"},
		"short secret": {func() { idempotency.NewKeyring(idempotency.SealingKey{ID: "k", Secret: k.Secret[:16]}) }, "NewKeyring"},
		"duplicate ID": {func() { idempotency.NewKeyring(k, sealingKey("k1", 2)) }, "NewKeyring"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				v := recover()
				if v == nil || !strings.Contains(fmt.Sprint(v), tc.want) {
					t.Errorf("panic %v, want one naming %s", v, tc.want)
				}
			}()
			tc.build()
		})
	}
}

// The replay cache holds the sealed bytes and opens them for each replay:
// a cached replay answers as the store's would, and a tenant whose keys
// are forgotten is refused from the cache too.
func TestSealedReplayCache(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	kr := idempotency.NewKeyring(sealingKey("acme-1", 1))
	ev := &events{}
	mem := memStore(t)
	watch := testkit.NewPurgeWatch(mem, mem)
	srv := idempotency.NewServer(watch, idempotency.WithScope(sealTenantScope), idempotency.WithObserver(ev),
		idempotency.WithReplayCache(100, 1<<20, time.Hour),
		idempotency.WithSealing(idempotency.Sealing{TenantKeys: func(context.Context, string) (*idempotency.Keyring, error) {
			mu.Lock()
			defer mu.Unlock()
			return kr, nil
		}}))
	t.Cleanup(func() { _ = srv.Close() })
	// The cache's subscription to the store's purges empties it once made:
	// fill it after.
	watch.WaitSubscribed(t, 1)
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "charge", Amount: 1}
	first, _, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil || !replayed || !proto.Equal(first, again) {
		t.Fatalf("cached replay: %v, replayed %v, %v", again, replayed, err)
	}
	cached := 0
	for _, e := range ev.All() {
		if e.Decision == idempotency.DecisionReplayed && e.Cached {
			cached++
		}
	}
	if cached != 1 {
		t.Fatalf("%d cached replays, want 1: %v", cached, ev)
	}
	mu.Lock()
	kr = idempotency.NewKeyring(sealingKey("acme-2", 2)) // acme's keys forgotten
	mu.Unlock()
	if _, _, err := ch.charge(ctx, srv, "order-1", req); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Errorf("a cached record of a shredded tenant: got %v, want ErrRecordCorrupt", err)
	}
	if n := ch.runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
}

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

func (s *claimHookStore) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	if s.onClaim != nil {
		s.onClaim()
	}
	return s.Store.Claim(ctx, key, fingerprint, lease, opts)
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

// sealedGolden is a record a sealing server stored before the
// cryptography moved to internal/seal: Do of sealOp, key order-1, for the
// tenant acme, with the request {Payload: "charge", Amount: 1}, under the
// key k1 (32 bytes of 1), answered {Payload: secretPayload, Amount: 1,
// Execution: 1}. internal/seal's tests open the same bytes.
type sealedGolden struct {
	StoreKey    string `json:"store_key"`
	Fingerprint string `json:"fingerprint"`
	Sealed      string `json:"sealed"`
}

// A record sealed by an earlier build replays, byte for byte, on a server
// with its key, as primary or as an older key: the format, the key
// derivation, the keyed fingerprint and the associated data are the ones
// it was sealed with.
func TestSealedRecordGolden(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("internal/seal/testdata/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var g sealedGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	fp, err := hex.DecodeString(g.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	data, err := hex.DecodeString(g.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	want := &testingv1.DoResponse{Payload: secretPayload, Amount: 1, Execution: 1}
	for name, kr := range map[string]*idempotency.Keyring{
		"primary": idempotency.NewKeyring(sealingKey("k1", 1)),
		"older":   idempotency.NewKeyring(sealingKey("k2", 2), sealingKey("k1", 1)),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := memStore(t)
			srv := sealedServer(st, kr)
			if sk, err := srv.StoreKey(sealOp, "acme", "order-1"); err != nil || sk != g.StoreKey {
				t.Fatalf("StoreKey = %q, %v; the golden record's is %q", sk, err, g.StoreKey)
			}
			rewrite(t, st, g.StoreKey, fp, data)
			var ch charger
			got, replayed, err := ch.charge(asTenant(t.Context(), "acme"), srv, "order-1", &testingv1.DoRequest{Payload: "charge", Amount: 1})
			if err != nil || !replayed || !proto.Equal(got, want) {
				t.Errorf("the golden record: %v, replayed %v, %v; want %v replayed", got, replayed, err, want)
			}
			if n := ch.runs.Load(); n != 0 {
				t.Errorf("the function ran %d times, want 0", n)
			}
		})
	}
}
