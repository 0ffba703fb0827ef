package admin_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// operatorTenants says which tenants each operator may act on; "*" is
// every tenant. In production, read it from the operator's certificate or
// your identity provider.
var operatorTenants = map[string]string{"oncall": "*", "acme-support": "acme"}

// tenantOf is the server's scope function: the caller's tenant.
func tenantOf(ctx context.Context) (string, error) {
	if v := metadata.ValueFromIncomingContext(ctx, "x-tenant"); len(v) == 1 {
		return v[0], nil
	}
	return "", nil
}

// An operator limited to one tenant: the AuthorizeFunc names the caller,
// and WithAuthorizeRequest lets acme's support read and purge acme's keys,
// named by client key, and refuses another tenant's key, a store key (it
// does not say whose entry it is) and the listings and counts of every
// tenant, before anything is read.
func ExampleWithAuthorizeRequest() {
	mem := memorystore.New()
	defer mem.Close()
	srv := idempotency.NewServer(mem, idempotency.WithScope(tenantOf))
	for _, tenant := range []string{"acme", "globex"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", tenant))
		if _, err := idempotency.Once(ctx, srv, "orders.ship", "order-7", nil, func(context.Context) error { return nil }); err != nil {
			log.Fatal(err)
		}
	}

	who := func(ctx context.Context, _ string) (string, error) {
		v := metadata.ValueFromIncomingContext(ctx, "x-operator") // in production: mTLS, a token
		if len(v) != 1 || operatorTenants[v[0]] == "" {
			return "", errors.New("not an operator")
		}
		return v[0], nil
	}
	perTenant := func(_ context.Context, r admin.Request) error {
		switch tenants := operatorTenants[r.Principal]; {
		case tenants == "*":
			return nil
		case r.AllScopes || r.ByStoreKey:
			return errors.New("an operator of one tenant names its keys by client key")
		case r.Scope != tenants:
			return errors.New("another tenant's key")
		}
		return nil
	}
	adminServer := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(adminServer, admin.NewService(srv, who, admin.WithAuthorizeRequest(perTenant)))
	lis := bufconn.Listen(1 << 20)
	go func() { _ = adminServer.Serve(lis) }()
	defer adminServer.Stop()
	conn, err := grpc.NewClient("passthrough:///admin", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := adminv1.NewAdminServiceClient(conn)

	get := func(operator, tenant string) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-operator", operator)
		resp, err := client.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{
			ClientKey: &adminv1.ClientKey{Name: "orders.ship", Scope: tenant, Key: "order-7"},
		}})
		fmt.Printf("%s gets %s's key: %v %v\n", operator, tenant, resp.GetEntry().GetState(), status.Code(err))
	}
	get("acme-support", "acme")
	get("acme-support", "globex")
	get("oncall", "globex")
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-operator", "acme-support")
	_, err = client.ListKeys(ctx, &adminv1.ListKeysRequest{})
	fmt.Println("acme-support lists every tenant's keys:", status.Code(err))
	// Output:
	// acme-support gets acme's key: STATE_COMPLETED OK
	// acme-support gets globex's key: STATE_UNSPECIFIED PermissionDenied
	// oncall gets globex's key: STATE_COMPLETED OK
	// acme-support lists every tenant's keys: PermissionDenied
}
