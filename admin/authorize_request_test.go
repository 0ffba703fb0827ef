package admin_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// readCounter is a memory store that counts what the admin service reads
// of it and purges in it.
type readCounter struct {
	*memorystore.Store
	reads atomic.Int64
}

func (c *readCounter) Lookup(ctx context.Context, key string) (store.Info, error) {
	c.reads.Add(1)
	return c.Store.Lookup(ctx, key)
}

func (c *readCounter) List(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	c.reads.Add(1)
	return c.Store.List(ctx, opts)
}

func (c *readCounter) Stats(ctx context.Context) (store.Stats, error) {
	c.reads.Add(1)
	return c.Store.Stats(ctx)
}

func (c *readCounter) Purge(ctx context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	c.reads.Add(1)
	return c.Store.Purge(ctx, key, opts)
}

// fromMetadata reads the caller's x-name metadata.
func fromMetadata(ctx context.Context, name string) string {
	if v := metadata.ValueFromIncomingContext(ctx, name); len(v) == 1 {
		return v[0]
	}
	return ""
}

// WithAuthorizeRequest decides per request, by the scope it names: an
// operator of tenant acme reads and purges acme's keys named by client
// key, and is refused another tenant's key, a store key, and the listings
// and counts of every scope with PERMISSION_DENIED, before anything is
// read; an operator of every scope is refused nothing. The function is
// given the method, the principal, and the scope, name, key and store key
// the request names; a refused purge is logged, and its entry is left.
func TestAuthorizeRequest(t *testing.T) {
	t.Parallel()
	st := &readCounter{Store: testkit.NewMemoryStore(t)}
	srv := idempotency.NewServer(st, idempotency.WithScope(func(ctx context.Context) (string, error) {
		return fromMetadata(ctx, "x-tenant"), nil
	}))
	ctx := t.Context()
	for _, tenant := range []string{"acme", "globex"} {
		tctx := metadata.NewIncomingContext(ctx, metadata.Pairs("x-tenant", tenant))
		if _, err := idempotency.Once(tctx, srv, "orders.ship", "o-1", nil, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		seen []admin.Request
		log  bytes.Buffer
	)
	operator := func(ctx context.Context, _ string) (string, error) { return fromMetadata(ctx, "x-operator"), nil }
	svc := admin.NewService(srv, operator, admin.WithLogger(slog.New(slog.NewTextHandler(&log, nil))),
		admin.WithAuthorizeRequest(func(_ context.Context, r admin.Request) error {
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
			switch {
			case r.Principal == "all":
				return nil
			case r.AllScopes || r.ByStoreKey:
				return errors.New("an operator of one tenant names its keys by client key")
			case r.Principal == "acme-op" && r.Scope == "acme":
				return nil
			}
			return errors.New("not this operator's tenant")
		}))
	c := adminv1.NewAdminServiceClient(testserver.Start(t, func(s grpc.ServiceRegistrar) {
		adminv1.RegisterAdminServiceServer(s, svc)
	}).Dial(t))
	as := func(who string) context.Context { return metadata.AppendToOutgoingContext(ctx, "x-operator", who) }
	client := func(scope string) *adminv1.ClientKey {
		return &adminv1.ClientKey{Name: "orders.ship", Scope: scope, Key: "o-1"}
	}
	acmeKey, _ := srv.StoreKey("orders.ship", "acme", "o-1")
	globexKey, _ := srv.StoreKey("orders.ship", "globex", "o-1")

	refused := map[string]func() error{
		"GetKey of another tenant": func() error {
			_, err := c.GetKey(as("acme-op"), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: client("globex")}})
			return err
		},
		"GetKey by store key": func() error {
			_, err := c.GetKey(as("acme-op"), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: globexKey}, Scope: "acme"})
			return err
		},
		"PurgeKey of another tenant": func() error {
			_, err := c.PurgeKey(as("acme-op"), &adminv1.PurgeKeyRequest{Key: &adminv1.PurgeKeyRequest_ClientKey{ClientKey: client("globex")}})
			return err
		},
		"ListKeys": func() error { _, err := c.ListKeys(as("acme-op"), &adminv1.ListKeysRequest{}); return err },
		"GetStats": func() error { _, err := c.GetStats(as("acme-op"), &adminv1.GetStatsRequest{}); return err },
	}
	for name, call := range refused {
		err := call()
		if status.Code(err) != codes.PermissionDenied || strings.Contains(err.Error(), "tenant") {
			t.Errorf("%s: %v, want PERMISSION_DENIED without the function's text", name, err)
		}
	}
	if n := st.reads.Load(); n != 0 {
		t.Fatalf("%d reads of the store by refused requests, want none", n)
	}
	if _, err := st.Store.Lookup(ctx, globexKey); err != nil {
		t.Fatalf("globex's entry after a refused purge: %v", err)
	}
	if !strings.Contains(log.String(), "purge refused") || !strings.Contains(log.String(), "code=PermissionDenied") {
		t.Errorf("log %q, want the refused purge", log.String())
	}

	resp, err := c.GetKey(as("acme-op"), &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: client("acme")}})
	if err != nil || resp.GetEntry().GetStoreKey() != acmeKey {
		t.Fatalf("GetKey of acme's key by acme's operator: %v, %v", resp, err)
	}
	if _, err := c.PurgeKey(as("acme-op"), &adminv1.PurgeKeyRequest{Key: &adminv1.PurgeKeyRequest_ClientKey{ClientKey: client("acme")}}); err != nil {
		t.Fatalf("PurgeKey of acme's key by acme's operator: %v", err)
	}
	if _, err := c.ListKeys(as("all"), &adminv1.ListKeysRequest{}); err != nil {
		t.Fatalf("ListKeys by the operator of every scope: %v", err)
	}
	if _, err := c.GetStats(as("all"), &adminv1.GetStatsRequest{}); err != nil {
		t.Fatalf("GetStats by the operator of every scope: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := map[string]admin.Request{
		"GetKey globex": {Method: adminv1.AdminService_GetKey_FullMethodName, Principal: "acme-op", Scope: "globex", Name: "orders.ship", Key: "o-1", StoreKey: globexKey},
		"GetKey store":  {Method: adminv1.AdminService_GetKey_FullMethodName, Principal: "acme-op", Scope: "acme", StoreKey: globexKey, ByStoreKey: true},
		"ListKeys":      {Method: adminv1.AdminService_ListKeys_FullMethodName, Principal: "all", AllScopes: true},
		"PurgeKey acme": {Method: adminv1.AdminService_PurgeKey_FullMethodName, Principal: "acme-op", Scope: "acme", Name: "orders.ship", Key: "o-1", StoreKey: acmeKey},
	}
	for name, w := range want {
		found := false
		for _, r := range seen {
			found = found || r == w
		}
		if !found {
			t.Errorf("%s: the function was not given %+v; it was given %+v", name, w, seen)
		}
	}
}

// WithAuthorizeRequest(nil) panics at NewService, naming the option.
func TestAuthorizeRequestNil(t *testing.T) {
	t.Parallel()
	defer func() {
		if p, _ := recover().(string); !strings.Contains(p, "admin: WithAuthorizeRequest") {
			t.Fatalf("panic %q, want one naming WithAuthorizeRequest", p)
		}
	}()
	admin.NewService(idempotency.NewServer(testkit.NewMemoryStore(t)), allowAll, admin.WithAuthorizeRequest(nil))
}
