package testkit_test

import (
	"context"
	"runtime"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// Start records an attempt before Config.Outer runs, so an attempt that an
// outer interceptor refuses is still counted, and skips a nil entry of
// Config.Outer; its Faults is the rig's own fault store, or Config.Store
// when that is one.
func TestStart(t *testing.T) {
	t.Parallel()
	refuse := func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.Unavailable, "refused by the outer interceptor")
	}
	f := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{nil, refuse}})
	_, err := f.Client.Do(testkit.WithKey(t.Context(), "k"), &testingv1.DoRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want the outer interceptor's UNAVAILABLE", err)
	}
	attempts := f.Attempts.All()
	if len(attempts) != 1 || len(attempts[0].Keys) != 1 || attempts[0].Keys[0] != "k" || attempts[0].Method != testingv1.TestService_Do_FullMethodName {
		t.Fatalf("attempts = %+v, want the one Do refused outside the recorder's view", attempts)
	}
	if n := f.Service.Executions(); n != 0 {
		t.Fatalf("the handler ran %d times behind a refusing outer interceptor", n)
	}
	if f.Faults == nil || f.Store != f.Faults {
		t.Fatalf("Faults = %v, Store = %v: want the rig's own fault store behind the interceptors", f.Faults, f.Store)
	}

	fs := faultstore.New(testkit.NewMemoryStore(t))
	if on := testkit.NewFixtureOn(t, fs, nil); on.Faults != fs {
		t.Fatal("NewFixtureOn's Faults is not the fault store it was given")
	}
}

// WantOneKey returns the key every attempt carried, and fails the test
// when there is no attempt, an attempt without exactly one key, or two
// keys that differ.
func TestWantOneKey(t *testing.T) {
	t.Parallel()
	one := testkit.Attempt{Keys: []string{"k"}}
	if got, failed := wantOneKey([]testkit.Attempt{one, one}); failed || got != "k" {
		t.Fatalf("two attempts with key k: got %q, failed %v", got, failed)
	}
	for _, tt := range []struct {
		name     string
		attempts []testkit.Attempt
	}{
		{name: "no attempt"},
		{name: "first without a key", attempts: []testkit.Attempt{{}, one}},
		{name: "later without a key", attempts: []testkit.Attempt{one, {}}},
		{name: "two keys on one attempt", attempts: []testkit.Attempt{{Keys: []string{"k", "k"}}}},
		{name: "another key later", attempts: []testkit.Attempt{one, {Keys: []string{"other"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, failed := wantOneKey(tt.attempts); !failed {
				t.Fatalf("WantOneKey passed and returned %q", got)
			}
		})
	}
}

// wantOneKey runs testkit.WantOneKey on attempts and reports what it
// returned and whether it failed the test.
func wantOneKey(attempts []testkit.Attempt) (key string, failed bool) {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		key = testkit.WantOneKey(tb, attempts)
	}()
	<-done
	return key, tb.failed
}

// fatalTB is a testing.TB whose Fatal and Fatalf record the failure and
// end the goroutine, as the testing package's do.
type fatalTB struct {
	testing.TB
	failed bool
}

func (*fatalTB) Helper() {}

func (tb *fatalTB) Fatal(...any) { tb.failed = true; runtime.Goexit() }

func (tb *fatalTB) Fatalf(string, ...any) { tb.failed = true; runtime.Goexit() }
