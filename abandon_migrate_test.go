package idempotency_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// TestAbandonedRecoverDuringMove (decision 292): a key abandoned by a
// server on the old store alone, before migratestore was rolled out, is
// recovered by a server on the adapter, not run again: the handler's first
// run may have acted.
func TestAbandonedRecoverDuringMove(t *testing.T) {
	t.Parallel()
	from, to := memorystore.New(), memorystore.New()
	t.Cleanup(func() { _ = from.Close(); _ = to.Close() })
	var recovered claims
	f := newFixtureOn(t, faultstoreOf(migratestore.New(from, to)), nil, recovering(func(ctx context.Context, req proto.Message) (proto.Message, error) {
		recovered.record(ctx)
		return &testingv1.DoResponse{Payload: "recovered"}, nil
	})...)
	req := &testingv1.DoRequest{Payload: "p"}
	abandonKey(t, from, f.Idempotency, doMethod, doMethod, "k", req) // its server, on the old store alone, died

	resp, err := f.Client.Do(withKey(t.Context(), "k"), req)
	if err != nil || resp.GetPayload() != "recovered" {
		t.Fatalf("retry through the adapter: %v, %v; want the recovered answer", resp, err)
	}
	if n := f.Service.Executions(); n != 0 {
		t.Fatalf("the handler ran %d times after the abandoned attempt; want the RecoverFunc instead", n)
	}
	if got := recovered.all(); len(got) != 1 || got[0].Attempt != 2 {
		t.Fatalf("recovery ran under %+v, want once under Attempt 2", got)
	}
}
