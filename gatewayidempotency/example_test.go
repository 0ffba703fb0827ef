package gatewayidempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
	testinggw "github.com/grpc-idempotency/idempotency/gatewayidempotency/internal/gatewaytest/gen/idempotency/testing/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A grpc-gateway mux in front of a gRPC server with the interceptor: a
// charge, its retry, and the same key with another body.
func ExampleServeMuxOptions() {
	store := memorystore.New()
	defer store.Close()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(store)))
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

	mux := runtime.NewServeMux(gatewayidempotency.ServeMuxOptions()...)
	if err := testinggw.RegisterTestServiceHandler(context.Background(), mux, conn); err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(mux)
	defer hs.Close()

	for _, body := range []string{`{"amount":"1999"}`, `{"amount":"1999"}`, `{"amount":"2500"}`} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/required", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", `"order-1"`)
		resp, err := hs.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer map[string]any
		_ = json.Unmarshal(b, &answer)
		if resp.StatusCode == http.StatusOK {
			fmt.Printf("%d Idempotent-Replayed=%q execution %v\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), answer["execution"])
		} else {
			fmt.Printf("%d %s reason %v\n", resp.StatusCode, resp.Header.Get("Content-Type"), answer["reason"])
		}
	}
	// Output:
	// 200 Idempotent-Replayed="" execution 1
	// 200 Idempotent-Replayed="true" execution 1
	// 422 application/problem+json reason IDEMPOTENCY_KEY_REUSED
}
