package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// abandonAs leaves storeKey abandoned in st, claimed with fp, as a server
// that died mid-handler leaves it, and returns the claim's token.
func abandonAs(t *testing.T, st *memorystore.Store, storeKey string, fp []byte) string {
	t.Helper()
	c, err := st.Claim(t.Context(), storeKey, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if err := st.Abandon(t.Context(), storeKey, c.Token); err != nil {
		t.Fatal(err)
	}
	return c.Token
}

// Server.Resolve completes an abandoned key of a sealing server with the
// response the operator gives, as the function's own would be stored:
// sealed with the scope's primary key, holding no plaintext, and replayed
// to the next call byte for byte, marked replayed, the function not run
// (decision 298). It is one resolved event naming the store key, with no
// method. A server without the sealing keys refuses to resolve it
// (ErrRecordCorrupt), storing nothing; a second resolution of the key, now
// completed, is refused with ErrNotAbandoned (decision 297).
func TestServerResolveSealed(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	var events testkit.Events
	srv := sealedServer(st, idempotency.NewKeyring(sealingKey("k1", 1)), idempotency.WithObserver(&events))
	var ch charger
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "charge", Amount: 4200}
	// The keyed fingerprint of req, as the server claims with it.
	if _, _, err := ch.charge(ctx, srv, "order-1", req); err != nil {
		t.Fatal(err)
	}
	done := entry(t, srv, st, "acme", "order-1")
	sk, _ := srv.StoreKey(sealOp, "acme", "order-1")
	if _, err := st.Purge(t.Context(), sk, store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	token := abandonAs(t, st, sk, done.Fingerprint)

	// A server without the sealing keys stores nothing its calls would
	// refuse as corrupt.
	plain := idempotency.NewServer(st)
	defer plain.Close()
	if _, err := plain.Resolve(t.Context(), sk, idempotency.Resolution{Token: token, Name: sealOp, Err: status.Error(codes.Internal, "x")}); !errors.Is(err, idempotency.ErrRecordCorrupt) {
		t.Fatalf("Resolve without the sealing keys = %v, want ErrRecordCorrupt", err)
	}
	if info, err := st.Lookup(t.Context(), sk); err != nil || info.State != store.StateAbandoned {
		t.Fatalf("entry %+v, %v after the refusal, want it abandoned", info, err)
	}

	want := &testingv1.DoResponse{Payload: "resolved " + secretPayload, Amount: 4200, Execution: 7}
	before, err := srv.Resolve(t.Context(), sk, idempotency.Resolution{Token: token, Name: sealOp, Scope: "acme", Response: want})
	if err != nil || before.State != store.StateAbandoned {
		t.Fatalf("Resolve = %+v, %v; want the abandoned entry", before, err)
	}
	info := entry(t, srv, st, "acme", "order-1")
	if id, ok := idempotency.SealedBy(info.Data); !ok || id != "k1" || bytes.Contains(info.Data, []byte(secretPayload)) {
		t.Fatalf("stored record sealed by %q (%v), want k1 and no plaintext", id, ok)
	}
	got, replayed, err := ch.charge(ctx, srv, "order-1", req)
	if err != nil || !replayed || !proto.Equal(got, want) || ch.runs.Load() != 1 {
		t.Fatalf("call after Resolve = %v (replayed %v), %v after %d runs; want %v replayed after 1", got, replayed, err, ch.runs.Load(), want)
	}
	if ev := events.All(); events.Count(idempotency.DecisionResolved) != 1 || ev[len(ev)-2].Decision != idempotency.DecisionResolved ||
		ev[len(ev)-2].StoreKey != sk || ev[len(ev)-2].Method != "" || ev[len(ev)-2].Decision.String() != "resolved" {
		t.Fatalf("events %v, want one resolved event naming %s", ev, sk)
	}
	if _, err := srv.Resolve(t.Context(), sk, idempotency.Resolution{Token: info.Token, Rerun: true}); !errors.Is(err, idempotency.ErrNotAbandoned) {
		t.Fatalf("Resolve of the completed key = %v, want ErrNotAbandoned", err)
	}
}

// Server.Resolve refuses, changing nothing and telling no one, a
// resolution fenced by another claim's token (ErrChanged), of an entry in
// flight under a live lease (ErrNotAbandoned), of a key that holds nothing
// (ErrNotFound), and one that is not exactly one resolution, has no token,
// an OK status, or a response of another type than the method's (decision
// 297). An error it stores replays as that status.
func TestServerResolveRefuses(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	var events testkit.Events
	srv := idempotency.NewServer(st, idempotency.WithObserver(&events))
	const method = testingv1.TestService_Do_FullMethodName
	fp, err := idempotency.Fingerprint(method, &testingv1.DoRequest{Payload: "p"})
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := srv.StoreKey(method, "", "k-1")
	token := abandonAs(t, st, sk, fp)
	resp := &testingv1.DoResponse{Payload: "r"}
	for _, tc := range []struct {
		name    string
		r       idempotency.Resolution
		changed bool // the error wraps store.ErrChanged
	}{
		{"no token", idempotency.Resolution{Rerun: true}, false},
		{"none", idempotency.Resolution{Token: token}, false},
		{"two", idempotency.Resolution{Token: token, Rerun: true, Response: resp}, false},
		{"OK", idempotency.Resolution{Token: token, Err: status.Error(codes.OK, "")}, false},
		{"another type", idempotency.Resolution{Token: token, Name: method, Response: &testingv1.DoRequest{}}, false},
		{"another token", idempotency.Resolution{Token: token + "x", Rerun: true}, true},
		{"another token, an error", idempotency.Resolution{Token: "x", Err: status.Error(codes.Internal, "x")}, true},
	} {
		_, err := srv.Resolve(t.Context(), sk, tc.r)
		if err == nil || errors.Is(err, store.ErrChanged) != tc.changed {
			t.Errorf("%s: Resolve = %v, want an error (ErrChanged: %v)", tc.name, err, tc.changed)
		}
	}
	if info, err := st.Lookup(t.Context(), sk); err != nil || info.State != store.StateAbandoned || info.Token != token {
		t.Fatalf("entry %+v, %v after the refusals, want it abandoned as it was", info, err)
	}
	live, err := st.Claim(t.Context(), "live", fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Resolve(t.Context(), "live", idempotency.Resolution{Token: live.Token, Rerun: true}); !errors.Is(err, idempotency.ErrNotAbandoned) {
		t.Fatalf("Resolve of a live claim = %v, want ErrNotAbandoned", err)
	}
	if _, err := srv.Resolve(t.Context(), "never", idempotency.Resolution{Token: "t", Rerun: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Resolve of nothing = %v, want ErrNotFound", err)
	}
	if n := events.Count(idempotency.DecisionResolved); n != 0 {
		t.Fatalf("%d resolved events, want none", n)
	}

	// An error resolution of an operation of Do replays as that status.
	const op = "payments.refund"
	req := &testingv1.DoRequest{Payload: "refund"}
	opFP, err := idempotency.Fingerprint(op, req)
	if err != nil {
		t.Fatal(err)
	}
	opKey, _ := srv.StoreKey(op, "", "k-2")
	opToken := abandonAs(t, st, opKey, opFP)
	declined := status.Error(codes.FailedPrecondition, "card declined")
	if _, err := srv.Resolve(t.Context(), opKey, idempotency.Resolution{Token: opToken, Name: op, Err: declined}); err != nil {
		t.Fatal(err)
	}
	_, replayed, err := idempotency.Do(context.Background(), srv, op, "k-2", req, func(context.Context) (*testingv1.DoResponse, error) {
		t.Error("the function ran")
		return &testingv1.DoResponse{}, nil
	})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" || !replayed {
		t.Fatalf("Do after Resolve = %v (replayed %v), want the resolved error, replayed", err, replayed)
	}
}
