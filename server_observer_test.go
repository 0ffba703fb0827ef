package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
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
			_, _ = f.client.Required(t.Context(), &testingv1.DoRequest{})
			return f.events
		}},
		{idempotency.DecisionKeyInvalid, func(t *testing.T) *events {
			f := newFixture(t, nil)
			_, _ = f.client.Do(withKey(t.Context(), "bad key"), &testingv1.DoRequest{})
			return f.events
		}},
		{idempotency.DecisionKeyReused, func(t *testing.T) *events {
			f := newFixture(t, nil)
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "a"})
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "b"})
			return f.events
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
				_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			}()
			<-started
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			close(release)
			<-done
			return f.events
		}},
		{idempotency.DecisionStoreError, func(t *testing.T) *events {
			f := newFixture(t, nil)
			f.store.Down.Store(true)
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.events
		}},
		{idempotency.DecisionStoreFull, func(t *testing.T) *events {
			f := newFixture(t, nil)
			f.store.Full.Store(true)
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.events
		}},
		{idempotency.DecisionRecordCorrupt, func(t *testing.T) *events {
			f := newFixture(t, nil)
			f.store.CorruptData.Store(true)
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			_, _ = f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.events
		}},
		{idempotency.DecisionMisconfigured, func(t *testing.T) *events {
			f := newFixture(t, nil, idempotency.WithDescriptors(unknownModeFiles(t, 9)))
			_, _ = f.client.Required(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			return f.events
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
