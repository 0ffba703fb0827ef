package idempotency_test

import (
	"context"
	"fmt"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// Tell a replayed answer from a fresh one with the call's header and
// trailer: a replayed success is marked in its header, a replayed error in
// its trailer. Here a client without the client interceptor sends each
// call twice with the same key.
func ExampleReplayed() {
	server := startLossyServer(0)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	for _, call := range []struct {
		key   string
		cents int64
	}{{"order-1042-payment", 4200}, {"order-1043-payment", -1}} {
		ctx, err := idempotency.ContextWithKey(context.Background(), call.key)
		if err != nil {
			log.Fatal(err)
		}
		for range 2 {
			var header, trailer metadata.MD
			resp, err := charge(ctx, conn, call.cents, grpc.Header(&header), grpc.Trailer(&trailer))
			fmt.Printf("%s %q: replayed %v\n", status.Code(err), resp.GetValue(), idempotency.Replayed(header, trailer))
		}
	}
	// Output:
	// OK "ch_1": replayed false
	// OK "ch_1": replayed true
	// InvalidArgument "": replayed false
	// InvalidArgument "": replayed true
}

// With the client interceptor, ReplayedInto says whether the answer the
// call ended with, after its retries, came from the server's store. The
// example server loses the first response after its handler ran, so the
// retry is answered from the store.
func ExampleReplayedInto() {
	server := startLossyServer(1)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	var replayed bool
	resp, err := charge(context.Background(), conn, 4200, idempotency.ReplayedInto(&replayed))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, replayed %v, charged %d time(s)\n", resp.GetValue(), replayed, server.payments.charges.Load())
	// Output:
	// ch_1, replayed true, charged 1 time(s)
}
