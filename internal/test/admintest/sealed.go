package admintest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// sealingKey returns a sealing key called id, its secret made of b.
func sealingKey(id string, b byte) idempotency.SealingKey {
	return idempotency.SealingKey{ID: id, Secret: bytes.Repeat([]byte{b}, idempotency.SealingKeySize)}
}

// The keys of the sealed cases: "k-2025" seals the calls, and "k-2026"
// replaces it later.
var (
	key2025 = sealingKey("k-2025", 1)
	key2026 = sealingKey("k-2026", 2)
)

// adminOf returns a client of the admin service of another server over
// st, built with opts: a server of the same fleet, which reads what the
// rig's server stored.
func adminOf(t *testing.T, st store.Store, opts ...idempotency.ServerOption) adminv1.AdminServiceClient {
	t.Helper()
	srv := idempotency.NewServer(st, opts...)
	t.Cleanup(func() { _ = srv.Close() })
	svc := admin.NewService(srv, authorize)
	lis := testserver.Start(t, func(s grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(s, svc) })
	return adminv1.NewAdminServiceClient(lis.Dial(t))
}

// getWith returns the entry that client's GetKey answers for req.
func getWith(t *testing.T, client adminv1.AdminServiceClient, req *adminv1.GetKeyRequest) *adminv1.Entry {
	t.Helper()
	resp, err := client.GetKey(as(t.Context(), Alice), req)
	if err != nil {
		t.Fatalf("GetKey(%v) = %v", req, err)
	}
	return resp.GetEntry()
}

// wantUnopened fails the test unless e is a completed entry sealed by
// sealedBy, without an outcome, marked sealed_unopened, whose
// outcome_error holds each of why.
func wantUnopened(t *testing.T, e *adminv1.Entry, sealedBy string, why ...string) {
	t.Helper()
	if e.GetState() != adminv1.State_STATE_COMPLETED || e.GetOutcome() != nil || e.GetSealedBy() != sealedBy || !e.GetSealedUnopened() {
		t.Fatalf("entry %v; want completed, sealed by %s, without an outcome, sealed_unopened", e, sealedBy)
	}
	for _, w := range why {
		if !strings.Contains(e.GetOutcomeError(), w) {
			t.Fatalf("outcome_error %q; want it to say %q", e.GetOutcomeError(), w)
		}
	}
}

// A record sealed by the server's primary key reads as an unsealed one
// does, and names its key. A server whose keyring holds that key as an
// older one still opens it; one whose keyring no longer holds it, or that
// has no keys, says so, and still names the key. Explain, which has no
// keys, refuses the sealed bytes as corrupt, naming the key.
func getSealed(t *testing.T, st store.Store) {
	r := newRig(t, st, idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(key2025)}))
	r.call(t, "k-sealed", "p")
	e := r.get(t, "k-sealed")
	if e.GetSealedBy() != key2025.ID || e.GetOutcomeError() != "" {
		t.Fatalf("entry %v; want it sealed by %s, with its outcome", e, key2025.ID)
	}
	wantOutcome(t, e.GetOutcome(), echoed(t, "p"))

	req := &adminv1.GetKeyRequest{Key: clientKey("k-sealed")}
	rotated := getWith(t, adminOf(t, st, idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(key2026, key2025)})), req)
	if rotated.GetSealedBy() != key2025.ID || rotated.GetOutcomeError() != "" {
		t.Fatalf("entry after rotation %v; want it sealed by the older key %s, with its outcome", rotated, key2025.ID)
	}
	wantOutcome(t, rotated.GetOutcome(), echoed(t, "p"))

	dropped := getWith(t, adminOf(t, st, idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(key2026)})), req)
	wantUnopened(t, dropped, key2025.ID, `"k-2025"`, "does not hold")
	wantUnopened(t, getWith(t, adminOf(t, st), req), key2025.ID, "no sealing keys")

	info, err := st.(store.Inspector).Lookup(t.Context(), e.GetStoreKey())
	if err != nil {
		t.Fatal(err)
	}
	if o, err := admin.Explain(info.Data, nil); o != nil || !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), `sealed by key "k-2025"`) {
		t.Fatalf("Explain(sealed record) = %v, %v; want store.ErrCorrupt naming the key", o, err)
	}
}

// tenantHeader carries the caller's tenant, the scope of the sealed
// scope case.
const tenantHeader = "x-tenant"

// A record sealed for a tenant (the scope) opens when GetKey and PurgeKey
// name the tenant's client key, or its store key with the tenant as the
// request's scope; the request's scope is ignored beside a client key. It
// does not open by its store key with no scope, or another tenant's: the
// entry then says why, with the key that sealed it. When the tenant's keys
// cannot be found (Sealing.TenantKeys fails), the entry says so with the
// key service's status, and still names the key.
func getSealedScope(t *testing.T, st store.Store) {
	tenantKey := sealingKey("acme-1", 3)
	keys := idempotency.NewKeyring(tenantKey) // each scope's key derived from it
	var keysDown atomic.Bool
	r := newRig(t, st,
		idempotency.WithScope(func(ctx context.Context) (string, error) {
			if v := metadata.ValueFromIncomingContext(ctx, tenantHeader); len(v) == 1 {
				return v[0], nil
			}
			return "", nil
		}),
		idempotency.WithSealing(idempotency.Sealing{TenantKeys: func(_ context.Context, scope string) (*idempotency.Keyring, error) {
			if keysDown.Load() {
				return nil, status.Error(codes.Unavailable, "key service down")
			}
			return keys, nil
		}}),
	)
	ctx := metadata.AppendToOutgoingContext(testkit.WithKey(t.Context(), "k-tenant"), tenantHeader, "acme")
	if _, err := r.client.Do(ctx, &testingv1.DoRequest{Payload: "p", Amount: 7}); err != nil {
		t.Fatal(err)
	}
	ck := &adminv1.ClientKey{Name: testingv1.TestService_Do_FullMethodName, Scope: "acme", Key: "k-tenant"}
	e := getWith(t, r.admin, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: ck}})
	if e.GetSealedBy() != tenantKey.ID || e.GetOutcomeError() != "" {
		t.Fatalf("entry %v; want it sealed by %s, with its outcome", e, tenantKey.ID)
	}
	wantOutcome(t, e.GetOutcome(), echoed(t, "p"))

	ignored := getWith(t, r.admin, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: ck}, Scope: "globex"})
	if ignored.GetSealedBy() != tenantKey.ID || ignored.GetOutcomeError() != "" {
		t.Fatalf("entry by client key with scope globex %v; want the client key's scope used, the outcome opened", ignored)
	}

	withScope := getWith(t, r.admin, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: e.GetStoreKey()}, Scope: "acme"})
	if withScope.GetSealedBy() != tenantKey.ID || withScope.GetOutcomeError() != "" {
		t.Fatalf("entry by store key with scope acme %v; want it sealed by %s, with its outcome", withScope, tenantKey.ID)
	}
	wantOutcome(t, withScope.GetOutcome(), echoed(t, "p"))

	byStoreKey := &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: e.GetStoreKey()}}
	wantUnopened(t, getWith(t, r.admin, byStoreKey), tenantKey.ID, "another scope's")
	otherScope := &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: e.GetStoreKey()}, Scope: "globex"}
	wantUnopened(t, getWith(t, r.admin, otherScope), tenantKey.ID, "another scope's")

	keysDown.Store(true)
	wantUnopened(t, getWith(t, r.admin, byStoreKey), tenantKey.ID, "sealing keys could not be found: Unavailable: key service down")
	keysDown.Store(false)

	purged, err := r.admin.PurgeKey(as(t.Context(), Alice), &adminv1.PurgeKeyRequest{Key: &adminv1.PurgeKeyRequest_ClientKey{ClientKey: ck}, Etag: e.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if purged.GetEntry().GetSealedBy() != tenantKey.ID {
		t.Fatalf("PurgeKey answered %v; want it sealed by %s", purged.GetEntry(), tenantKey.ID)
	}
	wantOutcome(t, purged.GetEntry().GetOutcome(), echoed(t, "p"))

	// The key's next call runs the handler again (execution 2), and its
	// entry is purged by its store key with the tenant's scope.
	if _, err := r.client.Do(ctx, &testingv1.DoRequest{Payload: "p", Amount: 7}); err != nil {
		t.Fatal(err)
	}
	again := echoed(t, "p")
	again.Response.Content = jsonOf(t, map[string]any{"payload": "p", "amount": "7", "execution": "2"})
	purged, err = r.admin.PurgeKey(as(t.Context(), Alice), &adminv1.PurgeKeyRequest{Key: &adminv1.PurgeKeyRequest_StoreKey{StoreKey: e.GetStoreKey()}, Scope: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if purged.GetEntry().GetSealedBy() != tenantKey.ID || purged.GetEntry().GetOutcomeError() != "" {
		t.Fatalf("PurgeKey by store key with scope acme answered %v; want it sealed by %s, with its outcome", purged.GetEntry(), tenantKey.ID)
	}
	wantOutcome(t, purged.GetEntry().GetOutcome(), again)
}
