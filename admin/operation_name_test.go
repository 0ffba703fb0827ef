package admin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// An operator finds the work of Do by the name Do ran it under, through
// Server.StoreKey and the admin service: an operation named like a gRPC
// method ("/pkg.Service/Method"), which StoreKey and the service read as
// the method, is refused by Do and Once with ErrMisconfigured, and nothing
// is stored under a key no one can find by its name.
func TestOperationNamedLikeAMethod(t *testing.T) {
	t.Parallel()
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem)
	conn := testserver.Start(t, func(s grpc.ServiceRegistrar) {
		adminv1.RegisterAdminServiceServer(s, admin.NewService(srv, allowAll))
	}).Dial(t)
	c := adminv1.NewAdminServiceClient(conn)
	ctx := t.Context()
	for _, op := range []string{"payments.capture", "/payments.v1.Payments/Capture"} {
		t.Run(op, func(t *testing.T) {
			ran, err := idempotency.Once(ctx, srv, op, "cap-1", nil, func(context.Context) error { return nil })
			if err != nil {
				if !errors.Is(err, idempotency.ErrMisconfigured) || !strings.Contains(err.Error(), `must not start with "/"`) {
					t.Fatalf("Once(%q) = %v, want nil or ErrMisconfigured naming the rule", op, err)
				}
				if ran {
					t.Fatalf("Once(%q) ran the function and refused the operation", op)
				}
				st, err := c.GetStats(ctx, &adminv1.GetStatsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if n := st.GetInFlight().GetEntries() + st.GetCompleted().GetEntries(); n != 1 {
					t.Fatalf("%d entries after a refused operation, want the other operation's only", n)
				}
				return
			}
			sk, err := srv.StoreKey(op, "", "cap-1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mem.Lookup(ctx, sk); err != nil {
				t.Fatalf("Lookup(StoreKey(%q)): %v: the operator cannot find the work Do ran under its name", op, err)
			}
			resp, err := c.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{
				ClientKey: &adminv1.ClientKey{Name: op, Key: "cap-1"},
			}})
			if err != nil {
				t.Fatalf("GetKey(%q): %v: the operator cannot find the work Do ran under its name", op, status.Convert(err).Message())
			}
			if resp.GetEntry().GetState() != adminv1.State_STATE_COMPLETED {
				t.Fatalf("GetKey(%q) = %v, want the completed entry", op, resp.GetEntry())
			}
		})
	}
	// The method's own key, by its name, is not Do's: nothing ran there.
	_, err := c.GetKey(ctx, &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{
		ClientKey: &adminv1.ClientKey{Name: "/payments.v1.Payments/Capture", Key: "cap-1"},
	}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetKey of the method = %v, want NOT_FOUND", err)
	}
}
