package idempotency_test

import (
	"context"
	"fmt"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// newPaymentsServer chains the idempotency interceptor into a gRPC server
// and registers the payments service (example_service_test.go). Any
// [store.Store] will do: memorystore for one process, redisstore for many.
func newPaymentsServer(st store.Store, opts ...idempotency.ServerOption) *grpc.Server {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(st, opts...),
	))
	registerPaymentsServer(srv, &paymentsServer{}) // yours: shopv1.RegisterPaymentsServiceServer
	return srv
}

// The server interceptor, chained into grpc.NewServer with the embedded
// memory store. A retry with the same key gets the stored answer, marked
// idempotency-replayed, and the handler does not run again.
func ExampleUnaryServerInterceptor() {
	// At most a million entries: about 700 MB with 200-byte responses.
	memory := memorystore.New(memorystore.WithMaxEntries(1_000_000))
	defer memory.Close()

	srv := newPaymentsServer(memory)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", serveInMemory(srv),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx := metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, "charge-42")
	for _, attempt := range []string{"first", "retry"} {
		var header metadata.MD
		resp, err := charge(ctx, conn, 4200, grpc.Header(&header))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, replayed %v\n", attempt, resp.GetValue(), header.Get(idempotency.ReplayedKey))
	}
	// Output:
	// first: ch_1, replayed []
	// retry: ch_1, replayed [true]
}

// Scope keys by the authenticated principal so that one tenant can never
// read another tenant's answer by sending the same key: here two tenants
// send the same key and each gets its own charge.
func ExampleWithScope() {
	memory := memorystore.New()
	defer memory.Close()

	srv := newPaymentsServer(memory,
		idempotency.WithScope(func(ctx context.Context) (string, error) {
			// In production: the principal your authentication step verified.
			md, _ := metadata.FromIncomingContext(ctx)
			if t := md.Get("tenant"); len(t) == 1 {
				return t[0], nil
			}
			return "", status.Error(codes.Unauthenticated, "no tenant")
		}),
	)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", serveInMemory(srv),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	for _, tenant := range []string{"tenant-a", "tenant-b", "tenant-a"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(),
			"tenant", tenant, idempotency.MetadataKey, "order-7")
		resp, err := charge(ctx, conn, 700)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(tenant+":", resp.GetValue())
	}
	_, err = charge(metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, "order-7"), conn, 700)
	fmt.Println("no tenant:", status.Code(err))
	// Output:
	// tenant-a: ch_1
	// tenant-b: ch_2
	// tenant-a: ch_1
	// no tenant: Unauthenticated
}
