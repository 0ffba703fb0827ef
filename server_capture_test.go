package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// callerKey carries the caller's own context to the handler, which runs on
// a context detached from it.
type callerKey struct{}

// keepCaller is a server interceptor that puts the caller's context in its
// own values, so a detached handler can wait for its caller to leave.
func keepCaller(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(context.WithValue(ctx, callerKey{}, ctx), req)
}

// TestDetachedHandlerMetadataIsReplayed: a handler that runs on after its
// caller cancelled, and only then sets its header and trailer (a charge
// id, a ledger entry), gets nil from grpc-go's calls as if the caller were
// there, and a retry with the same key gets that header and trailer in its
// replay. SetHeader after a sent header stays an error that nobody sees:
// not recorded, on a live stream or after the caller left.
func TestDetachedHandlerMetadataIsReplayed(t *testing.T) {
	t.Parallel()
	type step struct {
		api  string // "set", "send" or "trailer"
		key  string // set to "v"
		fail bool   // grpc-go's error is kept
	}
	const charge, ledger, late = "x-charge-id", "x-ledger", "x-late"
	cases := []struct {
		name string
		// live runs before the caller leaves, gone after.
		live, gone []step
		code       codes.Code
		header     string // the key the replay's header carries, set to "v"
		trailer    string
	}{
		{name: "SetHeader and SetTrailer", gone: []step{{"set", charge, false}, {"trailer", ledger, false}},
			header: charge, trailer: ledger},
		{name: "SendHeader and SetTrailer", gone: []step{{"send", charge, false}, {"trailer", ledger, false}},
			header: charge, trailer: ledger},
		{name: "stored error", gone: []step{{"set", charge, false}, {"trailer", ledger, false}},
			code: codes.FailedPrecondition, header: charge, trailer: ledger},
		{name: "SetHeader after SendHeader, caller gone", gone: []step{{"send", charge, false}, {"set", late, true}, {"trailer", ledger, false}},
			header: charge, trailer: ledger},
		{name: "SetHeader after SendHeader, live", live: []step{{"send", charge, false}, {"set", late, true}}, gone: []step{{"trailer", ledger, false}},
			header: charge, trailer: ledger},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			started, stepErrs := make(chan struct{}), make(chan error, 1)
			run := func(ctx context.Context, steps []step) error {
				for _, s := range steps {
					var err error
					switch md := metadata.Pairs(s.key, "v"); s.api {
					case "set":
						err = grpc.SetHeader(ctx, md)
					case "send":
						err = grpc.SendHeader(ctx, md)
					case "trailer":
						err = grpc.SetTrailer(ctx, md)
					}
					if (err != nil) != s.fail {
						return fmt.Errorf("%s %s: error %v, want an error: %v", s.api, s.key, err, s.fail)
					}
				}
				return nil
			}
			h := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				err := run(ctx, tc.live)
				close(started)
				<-ctx.Value(callerKey{}).(context.Context).Done() // the stream has ended
				stepErrs <- errors.Join(err, run(ctx, tc.gone))
				if tc.code != codes.OK {
					return nil, status.Error(tc.code, "declined")
				}
				return testserver.Echo(ctx, m, req)
			}
			mem := memStore(t)
			ev := &events{}
			srv := testserver.New(t, &testserver.Service{Handler: h},
				grpc.ChainUnaryInterceptor(keepCaller, idempotency.UnaryServerInterceptor(mem, idempotency.WithObserver(ev))))
			client := srv.Client(t)

			ctx := withKey(t.Context(), "k-detached")
			gone, leave := context.WithCancel(ctx)
			go func() { <-started; leave() }()
			if _, err := client.Do(gone, &testingv1.DoRequest{Payload: "p"}); status.Code(err) != codes.Canceled {
				t.Fatalf("first call: %v, want CANCELED", err)
			}
			if err := <-stepErrs; err != nil {
				t.Errorf("the handler's metadata calls: %v", err)
			}
			ev.Wait(t, idempotency.DecisionExecuted, 1)

			var header, trailer metadata.MD
			_, err := client.Do(ctx, &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header), grpc.Trailer(&trailer))
			if status.Code(err) != tc.code {
				t.Fatalf("retry: %v, want %v", err, tc.code)
			}
			if got := header.Get(tc.header); len(got) != 1 || got[0] != "v" {
				t.Errorf("replayed header %s = %q, want [v]", tc.header, got)
			}
			if got := trailer.Get(tc.trailer); len(got) != 1 || got[0] != "v" {
				t.Errorf("replayed trailer %s = %q, want [v]", tc.trailer, got)
			}
			if got := header.Get(late); len(got) != 0 {
				t.Errorf("replayed header x-late = %q: a SetHeader refused on a live stream was recorded", got)
			}
			if n := srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// TestHandlerCannotMarkLiveAnswerReplayed: a handler that copies an
// upstream answer's metadata, replay marker included, into its own answer
// (SetHeader, SendHeader or SetTrailer, on a success or an error) does not
// mark that answer as replayed, on every path that runs a handler: a
// claimed execution, an optional method called without a key, a method
// without deduplication, a store failing open. The rest of its metadata
// goes through, and a replay carries the marker once, from the store.
func TestHandlerCannotMarkLiveAnswerReplayed(t *testing.T) {
	t.Parallel()
	// The handler copies the marker with the API named by the payload, in
	// upper case when the amount is negative, and fails when the amount is
	// odd. grpc-go's own transport refuses an upper-case name (the call
	// fails) while net/http's, under ServeHTTP, lower-cases it into a
	// marker: it is stripped too.
	h := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		key := idempotency.ReplayedKey
		if req.GetAmount() < 0 {
			key = "Idempotency-Replayed"
		}
		md := metadata.MD{key: {"true"}, "x-upstream": {"kept"}}
		var err error
		switch req.GetPayload() {
		case "SetHeader":
			err = grpc.SetHeader(ctx, md)
		case "SendHeader":
			err = grpc.SendHeader(ctx, md)
		case "SetTrailer":
			err = grpc.SetTrailer(ctx, md)
		}
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%s: %v", req.GetPayload(), err)
		}
		if req.GetAmount()%2 != 0 {
			return nil, status.Error(codes.FailedPrecondition, "declined")
		}
		return testserver.Echo(ctx, m, req)
	}
	paths := []struct {
		name   string
		opts   []idempotency.ServerOption
		down   bool   // the store is down
		method string // "" is Do
		keyed  bool
		stored bool // a retry replays
	}{
		{name: "executed", keyed: true, stored: true},
		{name: "optional without a key"},
		{name: "disabled method", method: "Disabled", keyed: true},
		{name: "fail-open", opts: []idempotency.ServerOption{idempotency.WithFailOpen()}, down: true, keyed: true},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, h, p.opts...)
			f.Faults.Down.Store(p.down)
			call := methodOf(f.Client, p.method)
			for _, api := range []string{"SetHeader", "SendHeader", "SetTrailer"} {
				for _, amount := range []int64{2, 1, -2} { // success, error, upper-case marker
					req := &testingv1.DoRequest{Payload: api, Amount: amount}
					ctx := t.Context()
					if p.keyed {
						ctx = withKey(ctx, fmt.Sprintf("k-%s-%d", api, amount))
					}
					name := fmt.Sprintf("%s, amount %d", api, amount)
					var header, trailer metadata.MD
					_, err := call(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
					if c := status.Code(err); c != codes.OK && c != codes.FailedPrecondition {
						t.Fatalf("%s: %v", name, err)
					}
					if m := append(header.Get(idempotency.ReplayedKey), trailer.Get(idempotency.ReplayedKey)...); len(m) != 0 {
						t.Errorf("%s: live answer carries the replay marker %q", name, m)
					}
					if up := append(header.Get("x-upstream"), trailer.Get("x-upstream")...); len(up) != 1 {
						t.Errorf("%s: x-upstream %q, want the handler's one value", name, up)
					}
					if !p.stored {
						continue
					}
					header, trailer = nil, nil
					_, _ = call(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
					if m := append(header.Get(idempotency.ReplayedKey), trailer.Get(idempotency.ReplayedKey)...); len(m) != 1 || m[0] != "true" {
						t.Errorf("%s: replay carries the marker %q, want it once", name, m)
					}
				}
			}
		})
	}
}
