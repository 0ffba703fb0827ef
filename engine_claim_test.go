package idempotency_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// Two idempotency interceptors chained over one call (a platform-wide
// chain and a service's own, or a selector): over the same store with the
// same scope, the inner one recognises the claim the outer one took for
// this call and passes it through, so the handler runs once and the call
// succeeds, and its retry replays, also when the two compute fingerprints
// with different functions (the request is the same). Over different stores (comparable or
// not) or with different scopes, each claims and stores its own record.
func TestNestedInterceptors(t *testing.T) {
	t.Parallel()
	tenant := idempotency.WithScope(func(context.Context) (string, error) { return "tenant-1", nil })
	otherFingerprint := idempotency.WithFingerprint(func(string, protoMessage) ([]byte, error) { return []byte("the inner server's"), nil })
	uncomparable := func(s store.Store) store.Store { return uncomparableStore{Store: s} }
	tests := []struct {
		name      string
		wrap      func(store.Store) store.Store // of both stores; nil: none
		innerB    bool                          // the inner interceptor uses the second store
		innerOpts []idempotency.ServerOption
		// Claims and completes in each store after the call and its retry.
		wantClaims, wantCompletes [2]int
	}{
		{name: "same store", wantClaims: [2]int{2, 0}, wantCompletes: [2]int{1, 0}},
		{name: "different stores", innerB: true, wantClaims: [2]int{2, 1}, wantCompletes: [2]int{1, 1}},
		{name: "uncomparable stores", wrap: uncomparable, innerB: true, wantClaims: [2]int{2, 1}, wantCompletes: [2]int{1, 1}},
		{name: "different scopes", innerOpts: []idempotency.ServerOption{tenant}, wantClaims: [2]int{3, 0}, wantCompletes: [2]int{2, 0}},
		{name: "different fingerprint functions", innerOpts: []idempotency.ServerOption{otherFingerprint}, wantClaims: [2]int{2, 0}, wantCompletes: [2]int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fss := [2]*faultstore.Store{faultstore.New(memStore(t)), faultstore.New(memStore(t))}
			stores := [2]store.Store{fss[0], fss[1]}
			if tt.wrap != nil {
				stores = [2]store.Store{tt.wrap(fss[0]), tt.wrap(fss[1])}
			}
			outer, inner := stores[0], stores[0]
			if tt.innerB {
				inner = stores[1]
			}
			claims := make(chan bool, 2)
			srv := testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				_, ok := idempotency.ClaimFromContext(ctx)
				claims <- ok
				return testserver.Echo(ctx, method, req)
			}}, grpc.ChainUnaryInterceptor(
				idempotency.UnaryServerInterceptor(outer),
				idempotency.UnaryServerInterceptor(inner, tt.innerOpts...)))
			client := srv.Client(t)
			for n := range 2 {
				resp, err := client.Do(withKey(t.Context(), "k-1"), &testingv1.DoRequest{Payload: "p"})
				if err != nil || resp.GetExecution() != 1 {
					t.Fatalf("call %d = %v, %v; want execution 1", n+1, resp, err)
				}
			}
			if ok := <-claims; !ok {
				t.Fatal("the handler ran without a claim")
			}
			if n := srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			for s, fs := range fss {
				if got := [2]int{fs.Count("claim"), fs.Count("complete")}; got != [2]int{tt.wantClaims[s], tt.wantCompletes[s]} {
					t.Fatalf("store %c: %d claims and %d completes, want %d and %d",
						'a'+s, got[0], got[1], tt.wantClaims[s], tt.wantCompletes[s])
				}
			}
		})
	}
}

// uncomparableStore is a store value whose dynamic type cannot be compared
// with ==: comparing two of them as store.Store values panics.
type uncomparableStore struct {
	store.Store
	_ []int
}
