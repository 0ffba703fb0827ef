package idempotency_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// A client and a server built with the same WithMetadataKey option agree:
// every attempt carries the key under that name (and no
// other), so the retry of a lost response is replayed instead of running
// the handler a second time.
func TestClientMetadataKey(t *testing.T) {
	t.Parallel()
	const name = "x-request-key"
	tests := []struct {
		name string
		md   string // a key the caller puts in the outgoing metadata under name
		opts []grpc.CallOption
		want string // "" means a minted key
	}{
		{name: "minted"},
		{name: "WithKey", opts: []grpc.CallOption{idempotency.WithKey("k-option")}, want: "k-option"},
		{name: "caller's metadata", md: "k-md", want: "k-md"},
		{name: "caller's metadata and the same WithKey", md: "k-both", opts: []grpc.CallOption{idempotency.WithKey("k-both")}, want: "k-both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := idempotency.WithMetadataKey("X-Request-Key") // one Option for both sides
			rig := testkit.Start(t, testkit.Config{
				Outer:   []grpc.UnaryServerInterceptor{loseResponses(1)},
				Options: []idempotency.ServerOption{key},
			})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(key, idempotency.WithBackoff(noBackoff)))
			ctx := t.Context()
			if tt.md != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, name, tt.md)
			}

			var header metadata.MD
			opts := append([]grpc.CallOption{grpc.Header(&header)}, tt.opts...)
			resp, err := client.Do(ctx, &testingv1.DoRequest{Payload: "charge", Amount: 42}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if rig.Service.Executions() != 1 || resp.GetExecution() != 1 {
				t.Fatalf("handler ran %d times (response from execution %d), want once and a replay", rig.Service.Executions(), resp.GetExecution())
			}
			if got := header.Get(idempotency.ReplayedKey); !slices.Equal(got, []string{"true"}) {
				t.Fatalf("header %s = %q, want [true]", idempotency.ReplayedKey, got)
			}
			attempts := rig.Attempts.All()
			if len(attempts) != 2 {
				t.Fatalf("server saw %d attempts, want 2", len(attempts))
			}
			for i, a := range attempts {
				got := a.MD.Get(name)
				if len(got) != 1 || (tt.want != "" && got[0] != tt.want) || got[0] != attempts[0].MD.Get(name)[0] {
					t.Fatalf("attempt %d carried %s = %q, want one key (%q when set), the same on every attempt", i+1, name, got, tt.want)
				}
				if len(a.Keys) != 0 {
					t.Fatalf("attempt %d also carried %s = %q", i+1, idempotency.MetadataKey, a.Keys)
				}
			}
		})
	}
}

// A client metadata key that gRPC cannot carry the key under, as the
// server's WithMetadataKey would refuse it, is a programming error, found
// when the interceptor is built; the panic names the option.
func TestClientMetadataKeyInvalidPanics(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "Idempotency Key!", "clé", "idempotency-key-bin", "GRPC-Idempotency-Key"} {
		t.Run(quoted(name), func(t *testing.T) {
			t.Parallel()
			msg := panicOf(func() { idempotency.UnaryClientInterceptor(idempotency.WithMetadataKey(name)) })
			if !strings.HasPrefix(msg, "idempotency: WithMetadataKey: metadata key") {
				t.Fatalf("panic %q, want one naming WithMetadataKey", msg)
			}
		})
	}
	if msg := panicOf(func() { idempotency.UnaryClientInterceptor(idempotency.WithMetadataKey("X_Request.Key-2")) }); msg != "" {
		t.Fatalf("a valid name panicked: %s", msg)
	}
}

// A server's pushback longer than the cap ends the retries: the call
// returns the last error at once instead of parking for the pushback, even
// without a deadline. A pushback within the cap is still honoured.
func TestClientPushbackCap(t *testing.T) {
	t.Parallel()
	huge := &durationpb.Duration{Seconds: (1 << 62) / 1000} // 2^62 ms, beyond what durationpb can hold
	tests := []struct {
		name      string
		opts      []idempotency.ClientOption
		trailer   string               // grpc-retry-pushback-ms of the first answer, if any
		retryInfo *durationpb.Duration // RetryInfo of the first answer, if any
		wantCode  codes.Code           // the call's result
		wantCalls int                  // attempts the server saw
		wantWait  time.Duration        // least gap between the attempts
	}{
		{name: "pushback trailer of 2^62 ms", trailer: "4611686018427387904", wantCode: codes.Unavailable, wantCalls: 1},
		{name: "RetryInfo of 2^62 ms", retryInfo: huge, wantCode: codes.Unavailable, wantCalls: 1},
		{name: "RetryInfo of 200 years", retryInfo: durationpb.New(200 * 365 * 24 * time.Hour), wantCode: codes.Unavailable, wantCalls: 1},
		{name: "pushback just over the default cap", trailer: "60001", wantCode: codes.Unavailable, wantCalls: 1},
		{name: "pushback over a cap set in code", opts: []idempotency.ClientOption{idempotency.WithMaxPushback(50 * time.Millisecond)},
			trailer: "51", wantCode: codes.Unavailable, wantCalls: 1},
		{name: "RetryInfo over a cap set in code", opts: []idempotency.ClientOption{idempotency.WithMaxPushback(50 * time.Millisecond)},
			retryInfo: durationpb.New(51 * time.Millisecond), wantCode: codes.Unavailable, wantCalls: 1},
		{name: "pushback at the cap is honoured", opts: []idempotency.ClientOption{idempotency.WithMaxPushback(50 * time.Millisecond)},
			trailer: "50", wantCode: codes.OK, wantCalls: 2, wantWait: 50 * time.Millisecond},
		{name: "RetryInfo within the cap is honoured", opts: []idempotency.ClientOption{idempotency.WithMaxPushback(50 * time.Millisecond)},
			retryInfo: durationpb.New(30 * time.Millisecond), wantCode: codes.OK, wantCalls: 2, wantWait: 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{Handler: pushbackOnce(tt.trailer, tt.retryInfo)})
			opts := append([]idempotency.ClientOption{idempotency.WithBackoff(noBackoff)}, tt.opts...)
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(opts...))

			// No deadline: only the cap can stop a huge pushback from parking
			// the call.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cancel()
				<-done //nolint:errcheck // waits for the call to end; the test fails on the next line
				t.Fatalf("the call was still waiting after 10s (server saw %d attempts); want the pushback refused", len(rig.Attempts.All()))
			}
			if status.Code(err) != tt.wantCode {
				t.Fatalf("err = %v, want %v", err, tt.wantCode)
			}
			attempts := rig.Attempts.All()
			if len(attempts) != tt.wantCalls {
				t.Fatalf("server saw %d attempts, want %d", len(attempts), tt.wantCalls)
			}
			if len(attempts) == 2 {
				if gap := attempts[1].At.Sub(attempts[0].At); gap < tt.wantWait {
					t.Fatalf("the retry came %v after the first attempt, want at least %v", gap, tt.wantWait)
				}
			}
		})
	}
}

// pushbackOnce fails the first call with UNAVAILABLE, the pushback trailer
// and RetryInfo given (when set), and echoes every later call.
func pushbackOnce(trailer string, retryInfo *durationpb.Duration) testserver.HandlerFunc {
	first := make(chan struct{}, 1)
	first <- struct{}{}
	return func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		select {
		case <-first:
		default:
			return testserver.Echo(ctx, m, req)
		}
		if trailer != "" {
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", trailer))
		}
		st := status.New(codes.Unavailable, "come back later")
		if retryInfo != nil {
			var err error
			if st, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: retryInfo}); err != nil {
				panic(err)
			}
		}
		return nil, st.Err()
	}
}
