package idempotency_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"sync/atomic"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
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

// Dial with the client interceptor: every call gets a fresh key, and a call
// whose response is lost is retried with that key. The example server
// loses the first response after its handler ran, so the retry is answered
// from the server's store.
func ExampleUnaryClientInterceptor() {
	server := startClientExampleServer(1)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dialer,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testingv1.NewTestServiceClient(conn)

	var header metadata.MD
	resp, err := client.Do(context.Background(), &testingv1.DoRequest{Amount: 42}, grpc.Header(&header))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("execution %d, replayed %v\n", resp.GetExecution(), header.Get(idempotency.ReplayedKey))
	// Output:
	// execution 1, replayed [true]
}

// Give a call its own key, for example one saved with the order it pays
// for, so that a retry after a client crash reuses it.
func ExampleWithKey() {
	server := startClientExampleServer(0)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dialer,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testingv1.NewTestServiceClient(conn)

	for _, attempt := range []string{"first", "after restart"} {
		var header metadata.MD
		resp, err := client.Do(context.Background(), &testingv1.DoRequest{Amount: 42},
			idempotency.WithKey("order-1042-payment"), grpc.Header(&header))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: execution %d, replayed %v\n", attempt, resp.GetExecution(), header.Get(idempotency.ReplayedKey))
	}
	// Output:
	// first: execution 1, replayed []
	// after restart: execution 1, replayed [true]
}

// Keep go-grpc-middleware's retry and let this library only attach keys:
// chain the key-only interceptor first, so the key is in the outgoing
// metadata before the retry layer makes its attempts. The example server
// loses the first two responses.
func ExampleWithoutRetry() {
	server := startClientExampleServer(2)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dialer,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(
			idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()), // first: one key per call
			retry.UnaryClientInterceptor(retry.WithMax(5), retry.WithCodes(codes.Unavailable)),
		),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testingv1.NewTestServiceClient(conn)

	var header metadata.MD
	resp, err := client.Do(context.Background(), &testingv1.DoRequest{Amount: 42}, grpc.Header(&header))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("execution %d, replayed %v, handler ran %d time(s)\n",
		resp.GetExecution(), header.Get(idempotency.ReplayedKey), server.service.Executions())
	// Output:
	// execution 1, replayed [true], handler ran 1 time(s)
}

// clientExampleServer is the test service behind the idempotency server
// interceptor, on an in-memory listener.
type clientExampleServer struct {
	dialer  grpc.DialOption
	service *testserver.Service
	stop    func()
}

// startClientExampleServer starts a server that loses the first lose
// responses after its handler ran, as a flaky network would.
func startClientExampleServer(lose int64) *clientExampleServer {
	store := memorystore.New()
	var seen atomic.Int64
	loseFirst := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if seen.Add(1) <= lose {
			return nil, status.Error(codes.Unavailable, "response lost")
		}
		return resp, err
	}
	svc := &testserver.Service{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(loseFirst, idempotency.UnaryServerInterceptor(store)))
	testingv1.RegisterTestServiceServer(srv, svc)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	return &clientExampleServer{
		dialer: grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		}),
		service: svc,
		stop: func() {
			srv.Stop()
			_ = store.Close()
		},
	}
}
