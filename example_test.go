package idempotency_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// The server interceptor, chained into grpc.NewServer with the embedded
// memory store. A retry with the same key gets the stored answer.
func ExampleUnaryServerInterceptor() {
	store := memorystore.New()
	defer store.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(store),
	))
	testingv1.RegisterTestServiceServer(srv, &testserver.Service{})

	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testingv1.NewTestServiceClient(conn)

	ctx := metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, "charge-42")
	for _, attempt := range []string{"first", "retry"} {
		var header metadata.MD
		resp, err := client.Do(ctx, &testingv1.DoRequest{Amount: 42}, grpc.Header(&header))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: execution %d, replayed %v\n", attempt, resp.GetExecution(), header.Get(idempotency.ReplayedKey))
	}
	// Output:
	// first: execution 1, replayed []
	// retry: execution 1, replayed [true]
}

// Scope keys by the authenticated principal so that one tenant can never
// read another tenant's answer by sending the same key.
func ExampleWithScope() {
	store := memorystore.New()
	defer store.Close()

	interceptor := idempotency.UnaryServerInterceptor(store,
		idempotency.WithScope(func(ctx context.Context) (string, error) {
			// In production: the principal your authentication step verified.
			md, _ := metadata.FromIncomingContext(ctx)
			if t := md.Get("tenant"); len(t) == 1 {
				return t[0], nil
			}
			return "", status.Error(codes.Unauthenticated, "no tenant")
		}),
	)
	fmt.Println(interceptor != nil)
	// Output: true
}
