package connectidempotency_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// A retry gets the handler's answer byte for byte, over every protocol:
// the response message, the headers it set on the response and on the
// call's context, and its trailers; or its error's code, message, details
// and metadata. The replay marker is in the header of a response and the
// metadata of an error, and only there.
func TestUnaryReplayByteForByte(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var n int
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, handler: func(ctx context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
			n++
			if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
				info.ResponseHeader().Set("X-From-Context", "c")
			}
			if req.Msg.GetAmount() == 1 {
				ce := connect.NewError(connect.CodePermissionDenied, errors.New("no funds"))
				d, _ := connect.NewErrorDetail(&errdetails.LocalizedMessage{Locale: "en", Message: "no funds"})
				ce.AddDetail(d)
				ce.Meta().Set("X-Ledger", "l1")
				ce.Meta().Add("X-Ledger", "l2")
				return nil, ce
			}
			resp := connect.NewResponse(&testingv1.DoResponse{Payload: req.Msg.GetPayload(), Execution: int64(n), Blob: []byte{0, 1, 2}})
			resp.Header().Set("X-Charge", "ch_1")
			resp.Header().Add("X-Charge", "ch_2")
			resp.Header().Set("X-Sig-Bin", connect.EncodeBinaryHeader([]byte{0xff, 0}))
			resp.Trailer().Set("X-Total", "100")
			return resp, nil
		}})
		w := r.recordWire(t, p)
		t.Run("response", func(t *testing.T) {
			live, err := r.unary.Do(t.Context(), request("pay", "k-ok"))
			if err != nil {
				t.Fatal(err)
			}
			again, err := r.unary.Do(t.Context(), request("pay", "k-ok"))
			if err != nil {
				t.Fatal(err)
			}
			if connectidempotency.Replayed(live.Header()) || !connectidempotency.Replayed(again.Header()) {
				t.Fatalf("replay marker: live %v, retry %v; want false, true", live.Header(), again.Header())
			}
			if !bytes.Equal(marshal(t, live.Msg), marshal(t, again.Msg)) {
				t.Fatalf("replayed %v, live %v", again.Msg, live.Msg)
			}
			for _, h := range []string{"X-Charge", "X-Sig-Bin", "X-From-Context"} {
				if got, want := again.Header().Values(h), live.Header().Values(h); !equal(got, want) || len(want) == 0 {
					t.Errorf("header %s: replayed %q, live %q", h, got, want)
				}
			}
			if got, want := again.Trailer().Values("X-Total"), live.Trailer().Values("X-Total"); !equal(got, want) || len(want) != 1 {
				t.Errorf("trailer: replayed %q, live %q", got, want)
			}
			got := w.answers()
			sameWire(t, got[0], got[1])
		})
		t.Run("error", func(t *testing.T) {
			req := func() *connect.Request[testingv1.DoRequest] {
				r := request("pay", "k-err")
				r.Msg.Amount = 1
				return r
			}
			_, liveErr := r.unary.Do(t.Context(), req())
			_, againErr := r.unary.Do(t.Context(), req())
			live := wantCode(t, liveErr, connect.CodePermissionDenied, "")
			again := wantCode(t, againErr, connect.CodePermissionDenied, "")
			if !bytes.Equal(connecttest.StatusBytes(live), connecttest.StatusBytes(again)) {
				t.Fatalf("replayed %v, live %v", againErr, liveErr)
			}
			if connectidempotency.Replayed(live.Meta()) || !connectidempotency.Replayed(again.Meta()) {
				t.Fatalf("replay marker: live %v, retry %v; want false, true", live.Meta(), again.Meta())
			}
			for _, h := range []string{"X-Ledger", "X-From-Context"} {
				if got, want := again.Meta().Values(h), live.Meta().Values(h); !equal(got, want) || len(want) == 0 {
					t.Errorf("metadata %s: replayed %q, live %q", h, got, want)
				}
			}
		})
		if n != 2 {
			t.Fatalf("the handler ran %d times, want 2 (once per key)", n)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The method's policy comes from its proto options and its idempotency
// level: a REQUIRED method refuses a call without a key, a key_field method
// reads its key from the request, DISABLED and NO_SIDE_EFFECTS methods are
// never keyed, and the library's refusals are *connect.Errors with the
// gRPC interceptor's code and ErrorInfo.
func TestUnaryPolicies(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, handler: runs.handler})
		ctx := t.Context()

		_, err := r.unary.Required(ctx, request("a", ""))
		wantCode(t, err, connect.CodeInvalidArgument, idempotency.ErrKeyMissing.Reason)
		_, err = r.unary.Do(ctx, request("a", "a key"))
		wantCode(t, err, connect.CodeInvalidArgument, idempotency.ErrKeyInvalid.Reason)

		keyed := func(id string) *connect.Request[testingv1.DoRequest] {
			return connect.NewRequest(&testingv1.DoRequest{Payload: "k", RequestId: id})
		}
		for range 2 {
			if _, err := r.unary.Keyed(ctx, keyed("rid-1")); err != nil {
				t.Fatal(err)
			}
		}
		before := runs.count()
		if before != 1 {
			t.Fatalf("Keyed ran %d times for one request_id, want 1", before)
		}
		for _, m := range []func(context.Context, *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error){r.unary.Disabled, r.unary.Read} {
			for range 2 {
				resp, err := m(ctx, request("same", "k-same"))
				if err != nil {
					t.Fatal(err)
				}
				if connectidempotency.Replayed(resp.Header()) {
					t.Fatal("a DISABLED or NO_SIDE_EFFECTS method was replayed")
				}
			}
		}
		if got := runs.count() - before; got != 4 {
			t.Fatalf("DISABLED and NO_SIDE_EFFECTS ran %d times for two calls each, want 4", got)
		}
		if _, err := r.unary.Do(ctx, request("first", "k-reused")); err != nil {
			t.Fatal(err)
		}
		_, err = r.unary.Do(ctx, request("second", "k-reused"))
		wantCode(t, err, connect.CodeFailedPrecondition, idempotency.ErrKeyReused.Reason)
	})
}

// connect-go's IdempotencyLevel, set in code without a proto option:
// NO_SIDE_EFFECTS is never keyed; IDEMPOTENT is keyed as an unannotated
// method is.
func TestIdempotencyLevel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		level connect.IdempotencyLevel
		runs  int64
	}{
		{connect.IdempotencyNoSideEffects, 2},
		{connect.IdempotencyIdempotent, 1},
		{connect.IdempotencyUnknown, 1},
	} {
		t.Run(tt.level.String(), func(t *testing.T) {
			t.Parallel()
			var runs runs
			srv, _ := memServer(t)
			mux := http.NewServeMux()
			mux.Handle(testingv1connect.TestServiceDoProcedure, connect.NewUnaryHandler(testingv1connect.TestServiceDoProcedure,
				func(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
					return runs.handler(ctx, "", req)
				},
				connect.WithIdempotency(tt.level), connect.WithInterceptors(connectidempotency.NewInterceptor(srv))))
			s := connecttest.Serve(t, mux, connecttest.Protocols[0])
			client := testingv1connect.NewTestServiceClient(s.HTTP, s.URL)
			for range 2 {
				if _, err := client.Do(t.Context(), request("a", "k")); err != nil {
					t.Fatal(err)
				}
			}
			if got := runs.count(); got != tt.runs {
				t.Fatalf("ran %d times for two calls with one key, want %d", got, tt.runs)
			}
		})
	}
}

// A handler cannot mark its own answer replayed: the marker is removed
// from a live answer's header, trailer and error metadata, keyed or not.
func TestLiveAnswerNeverMarked(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, handler: func(ctx context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
			if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
				info.ResponseHeader()["idempotency-replayed"] = []string{"true"}
			}
			if req.Msg.GetAmount() == 1 {
				ce := connect.NewError(connect.CodeAborted, errors.New("no"))
				ce.Meta().Set(idempotency.ReplayedKey, "true")
				ce.Meta().Set(connectidempotency.ReplayedHeader, "true")
				return nil, ce
			}
			resp := connect.NewResponse(&testingv1.DoResponse{})
			resp.Header().Set(idempotency.ReplayedKey, "true")
			resp.Header()["idempotent-replayed"] = []string{"true"}
			resp.Trailer().Set(idempotency.ReplayedKey, "true")
			resp.Trailer().Set(connectidempotency.ReplayedHeader, "true")
			return resp, nil
		}})
		for _, key := range []string{"", "k1"} {
			for _, call := range []func(context.Context, *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error){r.unary.Do, r.unary.Read} {
				resp, err := call(t.Context(), request("a", key))
				if err != nil {
					t.Fatal(err)
				}
				if connectidempotency.Replayed(resp.Header()) || connectidempotency.Replayed(resp.Trailer()) {
					t.Fatalf("key %q: a live answer is marked replayed: %v %v", key, resp.Header(), resp.Trailer())
				}
				req := request("b", key+"-err")
				if key == "" {
					req = request("b", "")
				}
				req.Msg.Amount = 1
				_, err = call(t.Context(), req)
				var ce *connect.Error
				if !errors.As(err, &ce) || connectidempotency.Replayed(ce.Meta()) {
					t.Fatalf("key %q: a live error is marked replayed: %v", key, err)
				}
			}
		}
	})
}

// A replay is the same bytes whatever the codec: a JSON client gets the
// JSON the live answer had.
func TestReplayJSON(t *testing.T) {
	t.Parallel()
	for _, p := range []connecttest.Protocol{connecttest.Protocols[0], connecttest.Protocols[2]} {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			var runs runs
			srv, _ := memServer(t)
			r := newRig(t, p, setup{srv: srv, handler: runs.handler})
			w := r.recordWire(t, p, connect.WithProtoJSON())
			for range 2 {
				if _, err := r.unary.Do(t.Context(), request("json", "k")); err != nil {
					t.Fatal(err)
				}
			}
			got := w.answers()
			if ct := got[0].header.Get("Content-Type"); !strings.Contains(ct, "json") {
				t.Fatalf("the live answer's Content-Type is %q, not JSON", ct)
			}
			sameWire(t, got[0], got[1])
			if runs.count() != 1 {
				t.Fatalf("ran %d times, want 1", runs.count())
			}
		})
	}
}
