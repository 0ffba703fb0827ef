package connectidempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// The replay marker has one name on HTTP: on the Connect protocol, a
// plain HTTP protocol, it is Idempotent-Replayed, as httpidempotency and
// gatewayidempotency send it; on gRPC and gRPC-Web it stays the gRPC
// metadata idempotency-replayed, as grpc-go servers send it. Each answer
// carries one of the two names, never both: a replayed response's HTTP
// header, a replayed error's metadata, a replayed stream's header.
func TestReplayMarkerName(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		want, other := idempotency.ReplayedKey, connectidempotency.ReplayedHeader
		if len(p.Options) == 0 { // the Connect protocol
			want, other = other, want
		}
		check := func(t *testing.T, what string, h http.Header) {
			t.Helper()
			if got := h.Values(want); len(got) != 1 || got[0] != "true" || len(h.Values(other)) != 0 {
				t.Fatalf("%s: %s %q and %s %q, want only %s: true", what, want, got, other, h.Values(other), want)
			}
		}
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, handler: func(_ context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
			if req.Msg.GetAmount() == 1 {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("card declined")) // stored
			}
			return connect.NewResponse(&testingv1.DoResponse{Payload: req.Msg.GetPayload()}), nil
		}})
		w := r.recordWire(t, p)
		for range 2 {
			if _, err := r.unary.Do(t.Context(), request("pay", "k-ok")); err != nil {
				t.Fatal(err)
			}
		}
		check(t, "a replayed response's HTTP header", w.answers()[1].header)

		var meta http.Header
		for range 2 {
			req := request("pay", "k-err")
			req.Msg.Amount = 1
			_, err := r.unary.Do(t.Context(), req)
			meta = wantCode(t, err, connect.CodeInvalidArgument, "").Meta()
		}
		check(t, "a replayed error's metadata", meta)

		download(t.Context(), t, r, "k-stream", 2)
		check(t, "a replayed stream's header", download(t.Context(), t, r, "k-stream", 2).header)
	})
}

// A call without a key to a method that requires one is told to send it
// in a header, which is what connect-go calls what it carries on every
// protocol, not in "metadata".
func TestKeyMissingNamesTheHeader(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv})
		_, err := r.unary.Required(t.Context(), request("a", ""))
		ce := wantCode(t, err, connect.CodeInvalidArgument, idempotency.ErrKeyMissing.Reason)
		if want := `send it in the "idempotency-key" header`; !strings.Contains(ce.Message(), want) || strings.Contains(ce.Message(), "metadata") {
			t.Fatalf("message %q, want one that says %q", ce.Message(), want)
		}
	})
}
