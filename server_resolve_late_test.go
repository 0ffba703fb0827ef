package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// lateStore runs beforeClaim, once, before the first Claim it is sent:
// the late handler's own Complete landing between Resolve's Lookup and
// its take-over.
type lateStore struct {
	*memorystore.Store
	beforeClaim func()
}

func (s *lateStore) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	if f := s.beforeClaim; f != nil {
		s.beforeClaim = nil
		f()
	}
	return s.Store.Claim(ctx, key, fp, lease, opts)
}

// abandonCharge leaves the key "k" of the operation "charge" of srv
// abandoned in st, claimed for the request {Payload: "p"}, and returns
// its store key, the request's fingerprint and the claim's token.
func abandonCharge(t *testing.T, srv *idempotency.Server, st *memorystore.Store) (storeKey string, fp []byte, token string) {
	t.Helper()
	sk, err := srv.StoreKey("charge", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	if fp, err = idempotency.Fingerprint("charge", &testingv1.DoRequest{Payload: "p"}); err != nil {
		t.Fatal(err)
	}
	return sk, fp, abandonAs(t, st, sk, fp)
}

// lateCharge calls the operation "charge" of srv with key "k" and the
// request {Payload: "p"}, whose function answers {Payload: "handler"}
// once finish is closed. It returns the call's claim, once the function
// runs, and where its answer arrives.
func lateCharge(srv *idempotency.Server, finish <-chan struct{}) (idempotency.Claim, <-chan lateAnswer) {
	running, late := make(chan idempotency.Claim, 1), make(chan lateAnswer, 1)
	go func() {
		resp, replayed, err := idempotency.Do(context.Background(), srv, "charge", "k", &testingv1.DoRequest{Payload: "p"}, func(ctx context.Context) (*testingv1.DoResponse, error) {
			cl, _ := idempotency.ClaimFromContext(ctx)
			running <- cl
			<-finish
			return &testingv1.DoResponse{Payload: "handler"}, nil
		})
		late <- lateAnswer{resp, replayed, err}
	}()
	return <-running, late
}

// lateAnswer is the answer of a call of [lateCharge].
type lateAnswer struct {
	resp     *testingv1.DoResponse
	replayed bool
	err      error
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
	sk, _, token := abandonCharge(t, srv, st)
	late := []byte("the late handler's outcome")
	ls.beforeClaim = func() {
		if err := st.Complete(t.Context(), sk, token, late, time.Hour); err != nil {
			t.Errorf("the late handler's Complete: %v", err)
		}
	}
	_, err := srv.Resolve(t.Context(), sk, idempotency.Resolution{Token: token, Name: "charge", Response: &testingv1.DoResponse{Payload: "operator"}})
	if !errors.Is(err, store.ErrChanged) {
		t.Fatalf("Resolve = %v; want store.ErrChanged: the late handler completed the key first", err)
	}
	info, err := st.Lookup(t.Context(), sk)
	if err != nil || string(info.Data) != string(late) {
		t.Fatalf("entry %+v, %v; want the late handler's outcome", info, err)
	}
}

// TestServerResolveBeforeLateComplete (decision 314): an operator
// resolves a blocked key with a response while the handler that outlived
// its lease still runs; when that handler returns, its Complete is
// refused (the resolution took the entry over), so its caller does not
// get the handler's answer as executed but the stored one's retry hint,
// the store and the replay cache keep the operator's outcome, and every
// retry replays it.
func TestServerResolveBeforeLateComplete(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	var events testkit.Events
	srv := idempotency.NewServer(st, idempotency.WithAbandonedClaims(idempotency.AbandonBlock),
		idempotency.WithReplayCache(1000, 1<<20, time.Hour), idempotency.WithObserver(&events))
	defer srv.Close()
	const op = "charge"
	req := &testingv1.DoRequest{Payload: "p"}
	finish := make(chan struct{})
	cl, late := lateCharge(srv, finish)
	// The handler's lease lapses while it runs.
	if err := st.Abandon(t.Context(), cl.StoreKey, cl.Token); err != nil {
		t.Fatal(err)
	}
	operator := &testingv1.DoResponse{Payload: "operator"}
	if _, err := srv.Resolve(t.Context(), cl.StoreKey, idempotency.Resolution{Token: cl.Token, Name: op, Response: operator}); err != nil {
		t.Fatalf("Resolve = %v", err)
	}
	close(finish)
	got := <-late
	if got.err == nil && (!got.replayed || !proto.Equal(got.resp, operator)) {
		t.Fatalf("the late caller got %v (replayed %v) as its answer; the key holds the operator's %v", got.resp, got.replayed, operator)
	}
	if n := events.Count(idempotency.DecisionExecuted); n != 0 {
		t.Fatalf("%d executed events, want none: the handler's outcome was not stored", n)
	}
	if got.err != nil && !errors.Is(got.err, idempotency.ErrKeyInUse) {
		t.Fatalf("the late caller got %v, want ErrKeyInUse (retry the key)", got.err)
	}
	// Twice: the first may read the store, the second the replay cache.
	for range 2 {
		resp, replayed, err := idempotency.Do(t.Context(), srv, op, "k", req, func(context.Context) (*testingv1.DoResponse, error) {
			t.Error("the handler ran again")
			return nil, errors.New("ran")
		})
		if err != nil || !replayed || !proto.Equal(resp, operator) {
			t.Fatalf("retry = %v (replayed %v), %v; want the operator's %v, replayed", resp, replayed, err, operator)
		}
	}
	info, err := st.Lookup(t.Context(), cl.StoreKey)
	if err != nil || info.State != store.StateCompleted || info.Token == cl.Token {
		t.Fatalf("entry %+v, %v; want it completed under the resolution's own token", info, err)
	}
}

// TestServerResolveRerunBeforeLateComplete (decision 314): after a
// re-run resolution purged the blocked key, the late handler's Complete
// is refused (lease_lost), its caller is told to retry the key, and the
// next call runs the handler again, as the operator asked.
func TestServerResolveRerunBeforeLateComplete(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	var events testkit.Events
	srv := idempotency.NewServer(st, idempotency.WithAbandonedClaims(idempotency.AbandonBlock), idempotency.WithObserver(&events))
	defer srv.Close()
	req := &testingv1.DoRequest{Payload: "p"}
	finish := make(chan struct{})
	cl, late := lateCharge(srv, finish)
	if err := st.Abandon(t.Context(), cl.StoreKey, cl.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Resolve(t.Context(), cl.StoreKey, idempotency.Resolution{Token: cl.Token, Rerun: true}); err != nil {
		t.Fatalf("Resolve = %v", err)
	}
	close(finish)
	if err := (<-late).err; !errors.Is(err, idempotency.ErrKeyInUse) {
		t.Fatalf("the late caller got %v, want ErrKeyInUse", err)
	}
	if n, lost := events.Count(idempotency.DecisionExecuted), events.Count(idempotency.DecisionLeaseLost); n != 0 || lost != 1 {
		t.Fatalf("%d executed and %d lease_lost events, want 0 and 1", n, lost)
	}
	resp, replayed, err := idempotency.Do(t.Context(), srv, "charge", "k", req, func(context.Context) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: "again"}, nil
	})
	if err != nil || replayed || resp.GetPayload() != "again" {
		t.Fatalf("next call = %v (replayed %v), %v; want the handler run again", resp, replayed, err)
	}
}

// TestServerResolveAnotherAttempt (decision 314): when the entry the
// operator looked at was taken over and abandoned again before the
// resolution's own take-over, Resolve refuses with store.ErrChanged and
// leaves the entry abandoned as the later attempt left it.
func TestServerResolveAnotherAttempt(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ls := &lateStore{Store: st}
	srv := idempotency.NewServer(ls, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	defer srv.Close()
	sk, fp, token := abandonCharge(t, srv, st)
	var second string
	ls.beforeClaim = func() {
		c, err := st.Claim(t.Context(), sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
		if err != nil || c.Attempt != 2 {
			t.Fatalf("take-over = %+v, %v", c, err)
		}
		second = c.Token
		if err := st.Abandon(t.Context(), sk, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	_, err := srv.Resolve(t.Context(), sk, idempotency.Resolution{Token: token, Name: "charge", Response: &testingv1.DoResponse{Payload: "operator"}})
	if !errors.Is(err, store.ErrChanged) {
		t.Fatalf("Resolve = %v; want store.ErrChanged: another attempt was abandoned since", err)
	}
	info, err := st.Lookup(t.Context(), sk)
	if err != nil || info.State != store.StateAbandoned || info.Attempt != 3 || info.Data != nil {
		t.Fatalf("entry %+v, %v; want it abandoned again, as attempt 3, with no outcome", info, err)
	}
	if _, err := srv.Resolve(t.Context(), sk, idempotency.Resolution{Token: second, Rerun: true}); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("Resolve under the second attempt's token = %v; want store.ErrChanged: the entry's token is the give-back's", err)
	}
}
