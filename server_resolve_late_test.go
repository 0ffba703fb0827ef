package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// lateStore runs beforeComplete, once, before the first Complete it is
// sent: the late handler's own Complete landing between Resolve's Lookup
// and its Complete.
type lateStore struct {
	*memorystore.Store
	beforeComplete func()
}

func (s *lateStore) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	if f := s.beforeComplete; f != nil {
		s.beforeComplete = nil
		f()
	}
	return s.Store.Complete(ctx, key, token, data, retention)
}

// TestServerResolveRacesLateComplete (decision 297): when the handler
// that outlived its lease stores its outcome after the operator looked the
// key up, Resolve refuses with store.ErrChanged: the key holds the
// handler's outcome, not the operator's, and an operator told otherwise
// would, say, have the client retry a payment that was made.
func TestServerResolveRacesLateComplete(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ls := &lateStore{Store: st}
	srv := idempotency.NewServer(ls, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	sk, err := srv.StoreKey("charge", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	fp, err := idempotency.Fingerprint("charge", &testingv1.DoRequest{Payload: "p"})
	if err != nil {
		t.Fatal(err)
	}
	token := abandonAs(t, st, sk, fp)
	late := []byte("the late handler's outcome")
	ls.beforeComplete = func() {
		if err := st.Complete(t.Context(), sk, token, late, time.Hour); err != nil {
			t.Errorf("the late handler's Complete: %v", err)
		}
	}
	_, err = srv.Resolve(t.Context(), sk, idempotency.Resolution{Token: token, Name: "charge", Response: &testingv1.DoResponse{Payload: "operator"}})
	if !errors.Is(err, store.ErrChanged) {
		t.Fatalf("Resolve = %v; want store.ErrChanged: the late handler completed the key first", err)
	}
	info, err := st.Lookup(t.Context(), sk)
	if err != nil || string(info.Data) != string(late) {
		t.Fatalf("entry %+v, %v; want the late handler's outcome", info, err)
	}
}
