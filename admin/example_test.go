package admin_test

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// operatorToken stands for the credential of the operators; in production,
// authenticate them with mTLS (peer.FromContext) or your identity provider.
const operatorToken = "s3cret-operator-token"

// authorize lets the holders of the operator token call the admin service,
// and names them "oncall" in the purge log lines.
func authorize(ctx context.Context, method string) (string, error) {
	token := metadata.ValueFromIncomingContext(ctx, "x-operator-token")
	if len(token) != 1 || subtle.ConstantTimeCompare([]byte(token[0]), []byte(operatorToken)) != 1 {
		return "", errors.New("not an operator")
	}
	return "oncall", nil
}

// The admin service on a gRPC server of its own, which only operators
// reach, looks up what a key's call answered: here a function run once
// with Do under the operation "orders.create".
func ExampleNewService() {
	mem := memorystore.New()
	defer mem.Close()
	srv := idempotency.NewServer(mem)
	ctx := context.Background()
	_, _, err := idempotency.Do(ctx, srv, "orders.create", "order-7", &emptypb.Empty{},
		func(context.Context) (*wrapperspb.StringValue, error) { return wrapperspb.String("created o-1"), nil })
	if err != nil {
		log.Fatal(err)
	}

	adminServer := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(adminServer, admin.NewService(srv, authorize))
	lis := bufconn.Listen(1 << 20) // in production: net.Listen on the admin port
	go func() { _ = adminServer.Serve(lis) }()
	defer adminServer.Stop()

	conn, err := grpc.NewClient("passthrough:///admin", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := adminv1.NewAdminServiceClient(conn)
	resp, err := client.GetKey(metadata.AppendToOutgoingContext(ctx, "x-operator-token", operatorToken),
		&adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{
			ClientKey: &adminv1.ClientKey{Name: "orders.create", Key: "order-7"},
		}})
	if err != nil {
		log.Fatal(err)
	}
	e := resp.GetEntry()
	fmt.Println(e.GetState(), e.GetOutcome().GetKind(), e.GetOutcome().GetResponse().GetJson().GetStringValue())
	// Output: STATE_COMPLETED KIND_RESPONSE created o-1
}
