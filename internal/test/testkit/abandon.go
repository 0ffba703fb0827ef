package testkit

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store"
)

// Abandon makes key of op (a Do operation, or a gRPC method's full name)
// abandoned on st, as a server that died mid-handler leaves it: a claim
// for req, fingerprinted as id ([idempotency.Fingerprint]: the operation
// for [idempotency.Do], the full method for the interceptors), kept for an
// hour after its lease, then abandoned through the store
// ([store.Store.Abandon]) rather than by waiting for its lease to end.
// srv names the store key ([idempotency.Server.StoreKey], without scope).
// It returns the store key.
func Abandon(tb testing.TB, st store.Store, srv *idempotency.Server, op, id, key string, req proto.Message) string {
	tb.Helper()
	sk, err := srv.StoreKey(op, "", key)
	if err != nil {
		tb.Fatal(err)
	}
	fp, err := idempotency.Fingerprint(id, req)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := tb.Context()
	cl, err := st.Claim(ctx, sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err != nil || !cl.Won() {
		tb.Fatalf("testkit.Abandon: the claim of a free key: %+v, %v", cl, err)
	}
	if err := st.Abandon(ctx, sk, cl.Token); err != nil {
		tb.Fatalf("testkit.Abandon: %v", err)
	}
	return sk
}

// WantState fails tb unless the entry of store key sk on st, an
// [store.Inspector] or a fault store over one, is in state want.
func WantState(tb testing.TB, st store.Store, sk string, want store.State) {
	tb.Helper()
	if fs, ok := st.(*faultstore.Store); ok {
		st = fs.Store
	}
	in, ok := st.(store.Inspector)
	if !ok {
		tb.Fatalf("testkit.WantState: %T is no store.Inspector", st)
	}
	info, err := in.Lookup(tb.Context(), sk)
	if err != nil {
		tb.Fatalf("testkit.WantState: lookup: %v", err)
	}
	if info.State != want {
		tb.Fatalf("the entry is %v, want %v", info.State, want)
	}
}
