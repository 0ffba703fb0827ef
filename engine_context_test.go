package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestHandlerContextEndsUnwatched: a claimed handler that never waits on
// its context (no Done before the end, as a handler that only polls Err)
// still sees the end the standard library's contexts would give it: at the
// handler timeout, Err is DeadlineExceeded with cause ErrHandlerTimeout;
// after a lost lease, Canceled with a cause matching store.ErrLeaseLost.
// Done is then closed, and a context derived afterwards has ended with the
// same error and cause and still carries the claim.
func TestHandlerContextEndsUnwatched(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		opts      []idempotency.ServerOption
		fault     func(fs *faultstore.Store, c idempotency.Claim)
		wait      func(ctx context.Context, lost <-chan struct{})
		wantErr   error
		wantCause error
	}{
		"handler timeout": {
			opts: []idempotency.ServerOption{idempotency.WithHandlerTimeout(100 * time.Millisecond)},
			wait: func(ctx context.Context, _ <-chan struct{}) {
				d, _ := ctx.Deadline()
				<-time.After(time.Until(d))
			},
			wantErr: context.DeadlineExceeded, wantCause: idempotency.ErrHandlerTimeout,
		},
		"lease lost": {
			opts: []idempotency.ServerOption{idempotency.WithLease(150 * time.Millisecond)},
			fault: func(fs *faultstore.Store, c idempotency.Claim) {
				if err := fs.Store.Release(context.Background(), c.StoreKey, c.Token); err != nil {
					panic(err)
				}
			},
			wait:    func(_ context.Context, lost <-chan struct{}) { <-lost },
			wantErr: context.Canceled, wantCause: store.ErrLeaseLost,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lost := make(chan struct{}, 1)
			fs := faultstore.New(memStore(t))
			results := make(chan error, 1)
			h := func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				c, _ := idempotency.ClaimFromContext(ctx)
				if tc.fault != nil {
					tc.fault(fs, c)
				}
				tc.wait(ctx, lost)
				results <- checkEnded(ctx, c, tc.wantErr, tc.wantCause)
				return nil, status.Error(codes.Unavailable, "stopped")
			}
			observer := idempotency.ObserverFunc(func(_ context.Context, ev idempotency.Event) {
				if ev.Decision == idempotency.DecisionLeaseLost {
					select {
					case lost <- struct{}{}:
					default:
					}
				}
			})
			s := idempotency.NewServer(fs, append([]idempotency.ServerOption{idempotency.WithObserver(observer)}, tc.opts...)...)
			srv := testserver.New(t, &testserver.Service{Handler: h}, grpc.ChainUnaryInterceptor(s.UnaryServerInterceptor()))
			_, _ = srv.Client(t).Do(withKey(t.Context(), "k-unwatched"), &testingv1.DoRequest{})
			if err := <-results; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkEnded reports how ctx, a handler's context that nothing has waited
// on, differs from one that ended with wantErr and a cause matching
// wantCause and carries claim c.
func checkEnded(ctx context.Context, c idempotency.Claim, wantErr, wantCause error) error {
	if err := ctx.Err(); err != wantErr {
		return fmt.Errorf("Err() = %v, want %v", err, wantErr)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, wantCause) {
		return fmt.Errorf("Cause = %v, want one matching %v", cause, wantCause)
	}
	select {
	case <-ctx.Done():
	default:
		return errors.New("Done is open after Err returned an error")
	}
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := child.Err(); err != wantErr {
		return fmt.Errorf("derived context: Err() = %v, want %v", err, wantErr)
	}
	if cause := context.Cause(child); !errors.Is(cause, wantCause) {
		return fmt.Errorf("derived context: Cause = %v, want one matching %v", cause, wantCause)
	}
	if got, ok := idempotency.ClaimFromContext(child); !ok || got != c {
		return fmt.Errorf("derived context: claim %+v, %t, want %+v", got, ok, c)
	}
	return nil
}
