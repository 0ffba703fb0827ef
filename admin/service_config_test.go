package admin_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

func allowAll(context.Context, string) (string, error) { return "test", nil }

// NewService panics, naming what is wrong, without a server, without an
// authorization function (the service is never open by default), and
// with a nil logger.
func TestNewServicePanics(t *testing.T) {
	t.Parallel()
	srv := idempotency.NewServer(testkit.NewMemoryStore(t))
	for _, tc := range []struct {
		name, want string
		build      func()
	}{
		{"nil server", "the server must not be nil", func() { admin.NewService(nil, allowAll) }},
		{"nil authorize", "authorize must not be nil", func() { admin.NewService(srv, nil) }},
		{"nil logger", "WithLogger", func() { admin.NewService(srv, allowAll, admin.WithLogger(nil)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), tc.want) {
					t.Fatalf("panic %v, want one naming %q", p, tc.want)
				}
			}()
			tc.build()
		})
	}
}

// Over a store that is not a store.Inspector, every method answers
// UNIMPLEMENTED, after authorization.
func TestServiceStoreNotInspector(t *testing.T) {
	t.Parallel()
	fs := faultstore.New(testkit.NewMemoryStore(t))
	svc := admin.NewService(idempotency.NewServer(fs), allowAll)
	conn := testserver.Start(t, func(s grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(s, svc) }).Dial(t)
	c := adminv1.NewAdminServiceClient(conn)
	ctx := t.Context()
	sk := strings.Repeat("A", 43)
	for name, call := range map[string]func() error{
		"GetKey": func() error {
			_, err := c.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: sk}})
			return err
		},
		"ListKeys": func() error { _, err := c.ListKeys(ctx, &adminv1.ListKeysRequest{}); return err },
		"PurgeKey": func() error {
			_, err := c.PurgeKey(ctx, &adminv1.PurgeKeyRequest{Key: &adminv1.PurgeKeyRequest_StoreKey{StoreKey: sk}})
			return err
		},
		"GetStats": func() error { _, err := c.GetStats(ctx, &adminv1.GetStatsRequest{}); return err },
	} {
		if code := status.Code(call()); code != codes.Unimplemented {
			t.Errorf("%s: %v, want UNIMPLEMENTED", name, code)
		}
	}
	if calls := fs.Calls(); len(calls) != 0 {
		t.Fatalf("store calls %v, want none", calls)
	}
}

// Registered on the server whose interceptors require a key of every
// method, the admin service still answers calls without one, and its
// calls store nothing: the interceptors leave it alone, as they leave
// gRPC's own services.
func TestServiceBesideTheInterceptors(t *testing.T) {
	t.Parallel()
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem, idempotency.WithDefaultMode(idempotency.ModeRequired))
	svc := admin.NewService(srv, allowAll)
	conn := testserver.Start(t, func(s grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(s, svc) },
		grpc.ChainUnaryInterceptor(srv.UnaryServerInterceptor()), grpc.ChainStreamInterceptor(srv.StreamServerInterceptor())).Dial(t)
	c := adminv1.NewAdminServiceClient(conn)
	for range 2 {
		st, err := c.GetStats(t.Context(), &adminv1.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if n := st.GetCompleted().GetEntries() + st.GetInFlight().GetEntries(); n != 0 {
			t.Fatalf("GetStats = %v: the admin call stored an entry", st)
		}
	}
}
