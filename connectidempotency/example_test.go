package connectidempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A connect-go service behind the handler interceptor, and a client
// through the client interceptor: the client gives the call a key, and
// the same key sent again gets the stored answer, marked replayed, while
// the handler runs once.
func Example() {
	mem := memorystore.New()
	defer mem.Close()
	srv := idempotency.NewServer(mem)

	mux := http.NewServeMux()
	mux.Handle(testingv1connect.NewTestServiceHandler(&connecttest.TestService{Handler: charge()},
		connect.WithInterceptors(connectidempotency.NewInterceptor(srv))))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	client := testingv1connect.NewTestServiceClient(ts.Client(), ts.URL,
		connect.WithInterceptors(connectidempotency.NewClientInterceptor()))
	ctx, _ := idempotency.ContextWithKey(context.Background(), "order-1")
	for range 2 {
		resp, err := client.Do(ctx, connect.NewRequest(&testingv1.DoRequest{Payload: "order-1"}))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s (replayed: %v)\n", resp.Msg.GetPayload(), connectidempotency.Replayed(resp.Header()))
	}
	// Output:
	// charged order-1, run 1 (replayed: false)
	// charged order-1, run 1 (replayed: true)
}

// charge returns the handler: it charges the order named by the payload,
// and counts its runs.
func charge() connecttest.Handler {
	n := 0
	return func(_ context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
		n++
		return connect.NewResponse(&testingv1.DoResponse{Payload: fmt.Sprintf("charged %s, run %d", req.Msg.GetPayload(), n)}), nil
	}
}

// A refusal carries the library's ErrorInfo, which the client interceptor
// turns into its sentinel: errors.Is works on the *connect.Error.
func ExampleNewClientInterceptor() {
	mem := memorystore.New()
	defer mem.Close()
	mux := http.NewServeMux()
	mux.Handle(testingv1connect.NewTestServiceHandler(&connecttest.TestService{Handler: charge()},
		connect.WithInterceptors(connectidempotency.NewInterceptor(idempotency.NewServer(mem)))))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	client := testingv1connect.NewTestServiceClient(ts.Client(), ts.URL,
		connect.WithInterceptors(connectidempotency.NewClientInterceptor(idempotency.WithMaxAttempts(3))))

	ctx, _ := idempotency.ContextWithKey(context.Background(), "order-2")
	_, _ = client.Do(ctx, connect.NewRequest(&testingv1.DoRequest{Payload: "order-2"}))
	_, err := client.Do(ctx, connect.NewRequest(&testingv1.DoRequest{Payload: "another order"}))
	fmt.Println(connect.CodeOf(err), errors.Is(err, idempotency.ErrKeyReused))
	// Output:
	// failed_precondition true
}
