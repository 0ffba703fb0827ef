package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// providerPayments implements the payments service by charging through a
// payment provider's HTTP API, with a key derived from the call's claim in
// the provider's Idempotency-Key header. Saving the charge fails the first
// time, after the provider has charged, as a database that is briefly
// unreachable does.
type providerPayments struct {
	provider   *http.Client
	saveFailed atomic.Bool
}

func (p *providerPayments) Charge(ctx context.Context, cents *wrapperspb.Int64Value) (*wrapperspb.StringValue, error) {
	key, ok := idempotency.DerivedKey(ctx, "provider-charge")
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "send an idempotency key")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://provider.example/v1/charges",
		strings.NewReader("amount="+strconv.FormatInt(cents.GetValue(), 10)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.provider.Do(req)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "the provider is unreachable")
	}
	defer resp.Body.Close()
	id, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "the provider's answer was cut")
	}
	if p.saveFailed.CompareAndSwap(false, true) {
		// UNAVAILABLE is not stored: the claim is released and the
		// client's retry runs the handler again.
		return nil, status.Error(codes.Unavailable, "saving the charge failed")
	}
	return wrapperspb.String(string(id)), nil
}

// A handler that charges through a payment provider's HTTP API sends the
// provider a key derived from its claim. When the handler runs again for
// the same client key (here its first run failed after the provider had
// charged; after a crash, once the lease runs out), it derives the same
// key, and the provider answers with the first charge instead of charging
// twice.
func ExampleDerivedKey() {
	memory := memorystore.New()
	defer memory.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(memory)))
	registerPaymentsServer(srv, &providerPayments{provider: &http.Client{Transport: &paymentProvider{}}})
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", serveInMemory(srv),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(idempotency.UnaryClientInterceptor(idempotency.WithBackoff(nil))))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	resp, err := charge(context.Background(), conn, 4200, idempotency.WithKey("order-7"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order-7:", resp.GetValue())
	// Output:
	// provider: Idempotency-Key JwcTuFsj3iTW4zWshbOEikDSKFy7b_nvLsAXNaisXqo: charged ch_1
	// provider: Idempotency-Key JwcTuFsj3iTW4zWshbOEikDSKFy7b_nvLsAXNaisXqo: replayed ch_1
	// order-7: ch_1
}

// paymentProvider stands in for a payment provider's HTTP API: it charges
// once per Idempotency-Key and answers a key it has seen with the first
// charge.
type paymentProvider struct {
	mu      sync.Mutex
	charges map[string]string // Idempotency-Key -> charge id
}

func (p *paymentProvider) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	what := "replayed"
	p.mu.Lock()
	id, seen := p.charges[key]
	if !seen {
		what = "charged"
		if p.charges == nil {
			p.charges = map[string]string{}
		}
		id = "ch_" + strconv.Itoa(len(p.charges)+1)
		p.charges[key] = id
	}
	p.mu.Unlock()
	fmt.Printf("provider: Idempotency-Key %s: %s %s\n", key, what, id)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(id)), Request: req}, nil
}
