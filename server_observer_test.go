package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sentinelOf is the sentinel each decision that fails a call answers with.
var sentinelOf = map[idempotency.Decision]error{
	idempotency.DecisionInFlight:       idempotency.ErrKeyInUse,
	idempotency.DecisionKeyReused:      idempotency.ErrKeyReused,
	idempotency.DecisionKeyMissing:     idempotency.ErrKeyMissing,
	idempotency.DecisionKeyInvalid:     idempotency.ErrKeyInvalid,
	idempotency.DecisionStoreError:     idempotency.ErrStoreUnavailable,
	idempotency.DecisionRecordCorrupt:  idempotency.ErrRecordCorrupt,
	idempotency.DecisionStoreFull:      idempotency.ErrStoreFull,
	idempotency.DecisionMisconfigured:  idempotency.ErrMisconfigured,
	idempotency.DecisionStreamTooLarge: idempotency.ErrStreamTooLarge,
	idempotency.DecisionResumeInvalid:  idempotency.ErrResumeInvalid,
}

// TestEventErrIsSentinel: the Err of an event whose decision failed the
// call matches, with errors.Is, the sentinel the caller got, for every
// such decision.
func TestEventErrIsSentinel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		decision idempotency.Decision
		provoke  func(t *testing.T) *events
	}{
		{idempotency.DecisionKeyMissing, func(t *testing.T) *events {
			f := newFixture(t, nil)
			_, _ = f.Client.Required(t.Context(), &testingv1.DoRequest{})
			return f.Events
		}},
		{idempotency.DecisionKeyInvalid, func(t *testing.T) *events {
			f := newFixture(t, nil)
			_, _ = f.Client.Do(withKey(t.Context(), "bad key"), &testingv1.DoRequest{})
			return f.Events
		}},
		{idempotency.DecisionKeyReused, func(t *testing.T) *events {
			f := newFixture(t, nil)
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "a"})
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "b"})
			return f.Events
		}},
		{idempotency.DecisionInFlight, func(t *testing.T) *events {
			started, release := make(chan struct{}), make(chan struct{})
			f := newFixture(t, func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				close(started)
				<-release
				return &testingv1.DoResponse{}, nil
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			}()
			<-started
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			close(release)
			<-done
			return f.Events
		}},
		{idempotency.DecisionStoreError, func(t *testing.T) *events {
			f := newFixture(t, nil)
			f.Faults.Down.Store(true)
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.Events
		}},
		{idempotency.DecisionStoreFull, func(t *testing.T) *events {
			f := newFixture(t, nil)
			f.Faults.Full.Store(true)
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.Events
		}},
		{idempotency.DecisionRecordCorrupt, func(t *testing.T) *events {
			f := newFixture(t, nil)
			f.Faults.CorruptData.Store(true)
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			_, _ = f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.Events
		}},
		{idempotency.DecisionMisconfigured, func(t *testing.T) *events {
			f := newFixture(t, nil, idempotency.WithDescriptors(unknownModeFiles(t, 9)))
			_, _ = f.Client.Required(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.Events
		}},
		{idempotency.DecisionStreamTooLarge, func(t *testing.T) *events {
			_, ev, c := streamsServer(t, faultstore.New(memStore(t)), idempotency.WithMaxStreamRequestBytes(20))
			_, _ = upload(withKey(t.Context(), "k"), c, []int64{1, 2, 3, 4})
			return ev
		}},
		{idempotency.DecisionResumeInvalid, func(t *testing.T) *events {
			_, ev, c := streamsServer(t, faultstore.New(memStore(t)))
			ctx := metadata.AppendToOutgoingContext(withKey(t.Context(), "k"), idempotency.ResumeAfterKey, "-1")
			_, _, _ = download(ctx, c, &testingv1.DoRequest{Amount: 1})
			return ev
		}},
	}
	if len(tests) != len(sentinelOf) {
		t.Fatalf("%d cases for %d decisions", len(tests), len(sentinelOf))
	}
	for _, tt := range tests {
		t.Run(tt.decision.String(), func(t *testing.T) {
			t.Parallel()
			seen := 0
			for _, e := range tt.provoke(t).All() {
				want, fails := sentinelOf[e.Decision]
				if !fails {
					continue
				}
				if !errors.Is(e.Err, want) {
					t.Errorf("%v event's Err %v does not match %v", e.Decision, e.Err, want)
				}
				if e.Decision == tt.decision {
					seen++
				}
			}
			if seen == 0 {
				t.Fatalf("no %v event", tt.decision)
			}
		})
	}
}

// TestEventNamesTheKey: every event of a keyed call carries its store
// key (the key the store was asked to claim), the client's key and the
// operation the key belongs to (the method, its namespace, or the
// operation of Do), through the unary interceptor, the stream
// interceptor, Do and the replay cache; a decision made before the key
// was read carries the operation and no key.
func TestEventNamesTheKey(t *testing.T) {
	t.Parallel()
	do := testingv1.TestService_Do_FullMethodName
	tests := []struct {
		name    string
		calls   func(t *testing.T) (*events, *faultstore.Store)
		op      string
		key     string // "" when no event of the case has a key
		minimum int    // events the case makes at least
	}{
		{"method", func(t *testing.T) (*events, *faultstore.Store) {
			f := newFixture(t, nil)
			for range 2 {
				if _, err := f.Client.Do(withKey(t.Context(), "k-method"), &testingv1.DoRequest{Payload: "a"}); err != nil {
					t.Fatal(err)
				}
			}
			return f.Events, f.Faults
		}, do, "k-method", 2},
		{"namespace", func(t *testing.T) (*events, *faultstore.Store) {
			f := newFixture(t, nil, idempotency.WithMethodPolicy(do, idempotency.MethodPolicy{Namespace: "shop.charge"}))
			if _, err := f.Client.Do(withKey(t.Context(), "k-ns"), &testingv1.DoRequest{Payload: "a"}); err != nil {
				t.Fatal(err)
			}
			_, _ = f.Client.Do(withKey(t.Context(), "k-ns"), &testingv1.DoRequest{Payload: "b"}) // key_reused
			return f.Events, f.Faults
		}, "shop.charge", "k-ns", 2},
		{"cached replay", func(t *testing.T) (*events, *faultstore.Store) {
			f := newFixture(t, nil, cacheOpt)
			for range 2 {
				if _, err := f.Client.Do(withKey(t.Context(), "k-cached"), &testingv1.DoRequest{Payload: "a"}); err != nil {
					t.Fatal(err)
				}
			}
			if cachedReplays(f) != 1 {
				t.Fatal("the second call was not replayed from the cache")
			}
			return f.Events, f.Faults
		}, do, "k-cached", 2},
		{"stream", func(t *testing.T) (*events, *faultstore.Store) {
			fs := faultstore.New(memStore(t))
			_, ev, c := streamsServer(t, fs)
			if _, err := upload(withKey(t.Context(), "k-stream"), c, []int64{1, 2}); err != nil {
				t.Fatal(err)
			}
			return ev, fs
		}, testingv1.StreamService_Upload_FullMethodName, "k-stream", 1},
		{"Do", func(t *testing.T) (*events, *faultstore.Store) {
			ev := &events{}
			fs := faultstore.New(memStore(t))
			srv := idempotency.NewServer(fs, idempotency.WithObserver(ev))
			for range 2 {
				if _, err := idempotency.Once(t.Context(), srv, "payments.charge", "k-do", wrapperspb.Int64(1),
					func(context.Context) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			return ev, fs
		}, "payments.charge", "k-do", 2},
		{"key missing", func(t *testing.T) (*events, *faultstore.Store) {
			f := newFixture(t, nil)
			_, _ = f.Client.Required(t.Context(), &testingv1.DoRequest{})
			return f.Events, f.Faults
		}, testingv1.TestService_Required_FullMethodName, "", 1},
		{"key invalid, namespace", func(t *testing.T) (*events, *faultstore.Store) {
			f := newFixture(t, nil, idempotency.WithMethodPolicy(do, idempotency.MethodPolicy{Namespace: "shop.charge"}))
			_, _ = f.Client.Do(withKey(t.Context(), "bad key"), &testingv1.DoRequest{})
			return f.Events, f.Faults
		}, "shop.charge", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, fs := tt.calls(t)
			var storeKey string
			for _, c := range fs.Calls() {
				if c.Op == "claim" {
					storeKey = c.Key
					break
				}
			}
			if (storeKey != "") != (tt.key != "") {
				t.Fatalf("store key %q claimed; the case expects a key: %v", storeKey, tt.key != "")
			}
			all := ev.All()
			if len(all) < tt.minimum {
				t.Fatalf("%d events (%v), want at least %d", len(all), ev, tt.minimum)
			}
			for _, e := range all {
				if e.Operation != tt.op || e.StoreKey != storeKey || e.Key != tt.key {
					t.Errorf("%v event: Operation %q, StoreKey %q, Key %q; want %q, %q, %q",
						e.Decision, e.Operation, e.StoreKey, e.Key, tt.op, storeKey, tt.key)
				}
			}
		})
	}
}

// TestObserverContextHasNoClaim: the observer is given the caller's
// context, which carries no claim, while the handler's carries the one
// whose store key the events name.
func TestObserverContextHasNoClaim(t *testing.T) {
	t.Parallel()
	ev := &events{}
	var inObserver atomic.Bool
	var handlerKey atomic.Value
	obs := idempotency.ObserverFunc(func(ctx context.Context, e idempotency.Event) {
		if _, ok := idempotency.ClaimFromContext(ctx); ok {
			inObserver.Store(true)
		}
		ev.Observe(ctx, e)
	})
	r := testkit.Serve(t, testkit.Config{
		Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
			c, _ := idempotency.ClaimFromContext(ctx)
			handlerKey.Store(c.StoreKey)
			return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
		},
		Options: []idempotency.ServerOption{idempotency.WithObserver(obs)},
	})
	if _, err := r.Client(t).Do(withKey(t.Context(), "k"), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if inObserver.Load() {
		t.Fatal("ClaimFromContext reported a claim in the observer's context")
	}
	all := ev.All()
	if len(all) != 1 || all[0].StoreKey == "" || all[0].StoreKey != handlerKey.Load() {
		t.Fatalf("events %+v; want one naming the handler's claim %q", all, handlerKey.Load())
	}
}
