package testkit

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// MoveOverServers follows the move procedure of docs/operations.md from
// store from to store to, over real gRPC servers: a server on the old
// store alone, one on the migratestore adapter, then one on the new store
// alone. A key completed on any of them is replayed by the next, and the
// handler runs once per key throughout.
func MoveOverServers(t *testing.T, from, to store.Store) {
	t.Helper()
	service := &testserver.Service{}
	serve := func(s store.Store) testingv1.TestServiceClient {
		srv := testserver.New(t, service, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(s)))
		return srv.Client(t)
	}
	old, moved, done := serve(from), serve(migratestore.New(from, to)), serve(to)
	steps := []struct {
		what     string
		client   testingv1.TestServiceClient
		key      string
		replayed bool
	}{
		{"old server runs a", old, "a", false},
		{"moved server replays a from the old store", moved, "a", true},
		{"moved server runs b", moved, "b", false},
		{"old server replays b", old, "b", true},
		{"moved server replays b", moved, "b", true},
		{"new server replays b, after the move", done, "b", true},
	}
	for _, st := range steps {
		var header metadata.MD
		ctx := metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, st.key)
		_, err := st.client.Do(ctx, &testingv1.DoRequest{Payload: st.key}, grpc.Header(&header))
		if err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if got := len(header.Get(idempotency.ReplayedKey)) == 1; got != st.replayed {
			t.Fatalf("%s: replayed = %v, want %v", st.what, got, st.replayed)
		}
	}
	if n := service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times for 2 keys", n)
	}
}
