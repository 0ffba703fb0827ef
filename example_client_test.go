package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// Dial with the client interceptor: every call gets a fresh key, and a call
// whose response is lost is retried with that key. The example server
// loses the first response after its handler ran, so the retry is answered
// from the server's store.
func ExampleUnaryClientInterceptor() {
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

	var header metadata.MD
	resp, err := charge(context.Background(), conn, 4200, grpc.Header(&header))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, replayed %v, charged %d time(s)\n",
		resp.GetValue(), header.Get(idempotency.ReplayedKey), server.payments.charges.Load())
	// Output:
	// ch_1, replayed [true], charged 1 time(s)
}

// Give a call its own key, for example one saved with the order it pays
// for, so that a retry after a client crash reuses it. WithKey is read by
// the client interceptor: without it on the connection, use
// ContextWithKey.
func ExampleWithKey() {
	server := startLossyServer(0)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	for _, attempt := range []string{"first", "after restart"} {
		var header metadata.MD
		resp, err := charge(context.Background(), conn, 4200,
			idempotency.WithKey("order-1042-payment"), grpc.Header(&header))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, replayed %v\n", attempt, resp.GetValue(), header.Get(idempotency.ReplayedKey))
	}
	// Output:
	// first: ch_1, replayed []
	// after restart: ch_1, replayed [true]
}

// A client without the client interceptor puts its key in the outgoing
// context: WithKey would send nothing on such a connection. It retries by
// itself, with the same context and so the same key.
func ExampleContextWithKey() {
	server := startLossyServer(1)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx, err := idempotency.ContextWithKey(context.Background(), "order-1042-payment")
	if err != nil {
		log.Fatal(err) // the key is not 1 to 255 bytes of printable ASCII
	}
	for attempt := 1; attempt <= 3; attempt++ {
		var header metadata.MD
		resp, err := charge(ctx, conn, 4200, grpc.Header(&header))
		if status.Code(err) == codes.Unavailable {
			fmt.Println("attempt", attempt, "lost its response")
			continue // in production: back off first
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d: %s, replayed %v\n", attempt, resp.GetValue(), header.Get(idempotency.ReplayedKey))
		break
	}
	// Output:
	// attempt 1 lost its response
	// attempt 2: ch_1, replayed [true]
}

// Branch on the sentinel an error matches, never on its message. Here a
// client bug reuses a key for another amount.
func ExampleError() {
	server := startLossyServer(0)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx := context.Background()
	_, err = charge(ctx, conn, 4200, idempotency.WithKey("order-1042-payment"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = charge(ctx, conn, 9900, idempotency.WithKey("order-1042-payment"))

	switch {
	case errors.Is(err, idempotency.ErrKeyReused):
		// A bug: the key was sent with another request. Never retry it.
		fmt.Println("bug, not retried:", status.Code(err), idempotency.Reason(err))
	case errors.Is(err, idempotency.ErrKeyInUse), errors.Is(err, idempotency.ErrStoreUnavailable),
		errors.Is(err, idempotency.ErrStoreFull):
		// Transient: the interceptor retried as long as it could; try again
		// later with the same key.
	case errors.Is(err, idempotency.ErrResponseNotRetained):
		// The call ran but its answer was too large to keep: look the
		// charge up instead of charging again.
	}
	// Output:
	// bug, not retried: FailedPrecondition IDEMPOTENCY_KEY_REUSED
}

// Keep go-grpc-middleware's retry and let this library only attach keys:
// chain the key-only interceptor first, so the key is in the outgoing
// metadata before the retry layer makes its attempts. The example server
// loses the first two responses.
func ExampleWithoutRetry() {
	server := startLossyServer(2)
	defer server.stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", server.dial,
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

	var header metadata.MD
	resp, err := charge(context.Background(), conn, 4200, grpc.Header(&header))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, replayed %v, charged %d time(s)\n",
		resp.GetValue(), header.Get(idempotency.ReplayedKey), server.payments.charges.Load())
	// Output:
	// ch_1, replayed [true], charged 1 time(s)
}

// lossyServer is the payments service behind the idempotency server
// interceptor, on an in-memory listener, behind a network that loses
// responses.
type lossyServer struct {
	dial     grpc.DialOption
	payments *paymentsServer
	stop     func()
}

// startLossyServer starts a server that loses the first lose responses
// after its handler ran, as a flaky network would: the client gets
// UNAVAILABLE although the charge happened.
func startLossyServer(lose int64) *lossyServer {
	memory := memorystore.New()
	var seen atomic.Int64
	loseFirst := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if seen.Add(1) <= lose {
			return nil, status.Error(codes.Unavailable, "response lost")
		}
		return resp, err
	}
	payments := &paymentsServer{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(loseFirst, idempotency.UnaryServerInterceptor(memory)))
	registerPaymentsServer(srv, payments)
	return &lossyServer{
		dial:     serveInMemory(srv),
		payments: payments,
		stop: func() {
			srv.Stop()
			_ = memory.Close()
		},
	}
}

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
