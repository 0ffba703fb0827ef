package otelidempotency_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// Each decision lands in the counter, in the store histogram when it made
// store calls, and on otelgrpc's server span of its call as the outcome
// attribute, with an event for replays and in-flight rejections.
func TestObserverRecordsDecisions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		calls     func(t *testing.T, s *server) // makes the calls; the last one's decision is checked
		spans     int                           // server spans the calls make
		outcome   idempotency.Decision
		events    []string
		storeTime bool
	}{
		{
			name:      "executed",
			calls:     func(t *testing.T, s *server) { mustCall(t, s, "k", "a") },
			spans:     1,
			outcome:   idempotency.DecisionExecuted,
			storeTime: true,
		},
		{
			name: "replayed",
			calls: func(t *testing.T, s *server) {
				mustCall(t, s, "k", "a")
				mustCall(t, s, "k", "a")
			},
			spans:     2,
			outcome:   idempotency.DecisionReplayed,
			events:    []string{"idempotency.replayed"},
			storeTime: true,
		},
		{
			name:      "in flight",
			calls:     inFlight,
			spans:     2,
			outcome:   idempotency.DecisionInFlight,
			events:    []string{"idempotency.in_flight"},
			storeTime: true,
		},
		{
			name: "key reused",
			calls: func(t *testing.T, s *server) {
				mustCall(t, s, "k", "a")
				wantCode(t, call(t, s, "k", "b"), codes.FailedPrecondition)
			},
			spans:     2,
			outcome:   idempotency.DecisionKeyReused,
			storeTime: true,
		},
		{
			name: "key missing",
			calls: func(t *testing.T, s *server) {
				_, err := s.Client(t).Required(t.Context(), &testingv1.DoRequest{Payload: "a"})
				wantCode(t, err, codes.InvalidArgument)
			},
			spans:   1,
			outcome: idempotency.DecisionKeyMissing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, nil)
			tt.calls(t, s)
			spans := s.tel.waitSpans(t, serverSpanName(requiredMethod), tt.spans)

			span := spanWithOutcome(t, spans, tt.outcome)
			if got := eventNames(span); !slices.Equal(got, tt.events) {
				t.Errorf("span events %v, want %v", got, tt.events)
			}
			if got, _ := attr(span, otelidempotency.OperationKey); got.AsString() != requiredMethod {
				t.Errorf("span %s = %q, want %q", otelidempotency.OperationKey, got.AsString(), requiredMethod)
			}
			wantKey := ""
			if tt.storeTime { // the decisions that made store calls had a key
				wantKey = s.store.Calls()[0].Key
			}
			if got, _ := attr(span, otelidempotency.StoreKeyKey); got.AsString() != wantKey {
				t.Errorf("span %s = %q, want %q", otelidempotency.StoreKeyKey, got.AsString(), wantKey)
			}
			for _, kv := range span.Attributes() {
				if kv.Value.AsString() == "k" {
					t.Errorf("span attribute %s holds the client's key", kv.Key)
				}
			}
			if n := s.tel.counter(t, requiredMethod, tt.outcome); n != 1 {
				t.Errorf("%s counter %s = %d, want 1", otelidempotency.DecisionsMetric, tt.outcome, n)
			}
			count, sum := s.tel.histogram(t, requiredMethod, tt.outcome)
			if tt.storeTime && (count != 1 || sum <= 0) {
				t.Errorf("%s for %s: count %d, sum %gs; want one positive time", otelidempotency.StoreDurationMetric, tt.outcome, count, sum)
			}
			if !tt.storeTime && count != 0 {
				t.Errorf("%s for %s: count %d, want none (no store call)", otelidempotency.StoreDurationMetric, tt.outcome, count)
			}
		})
	}
}

// A handler that outlives a third of its lease gets lease renewals as
// events on its span, which still ends with the call's decision.
func TestObserverLeaseRenewed(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, idempotency.WithLease(60*time.Millisecond))
	if _, err := s.Client(t).Required(withKey(t.Context(), "k"), &testingv1.DoRequest{
		Payload: "slow", Sleep: durationpb.New(200 * time.Millisecond),
	}); err != nil {
		t.Fatal(err)
	}
	span := spanWithOutcome(t, s.tel.waitSpans(t, serverSpanName(requiredMethod), 1), idempotency.DecisionExecuted)
	renewals := 0
	for _, name := range eventNames(span) {
		if name != "idempotency.lease_renewed" {
			t.Errorf("unexpected span event %q", name)
		}
		renewals++
	}
	if renewals == 0 {
		t.Fatal("no idempotency.lease_renewed event on the span")
	}
	if n := s.tel.counter(t, requiredMethod, idempotency.DecisionLeaseRenewed); n != int64(renewals) {
		t.Errorf("lease_renewed counter %d, want %d as on the span", n, renewals)
	}
}

// A handler whose lease ran out while it ran (renewal never landed) and
// whose key another call took over: its completion is refused, and its span
// says lease_lost with an event.
func TestObserverLeaseLost(t *testing.T) {
	t.Parallel()
	const lease = 100 * time.Millisecond
	release := make(chan struct{})
	s := newServer(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if req.GetPayload() == "first" {
			<-release
		}
		return testserver.Echo(ctx, m, req)
	}, idempotency.WithLease(lease), idempotency.WithFingerprint(func(method string, _ proto.Message) ([]byte, error) {
		return []byte(method), nil // the two executions differ on purpose
	}))
	s.store.SkipExtend.Store(true)
	client := s.Client(t)
	ctx := withKey(t.Context(), "k")
	first := make(chan error, 1)
	go func() {
		_, err := client.Required(ctx, &testingv1.DoRequest{Payload: "first"})
		first <- err
	}()
	s.Service.WaitExecutions(t, 1)
	time.Sleep(2 * lease) // the first lease runs out unrenewed
	if _, err := client.Required(ctx, &testingv1.DoRequest{Payload: "second"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	span := spanWithOutcome(t, s.tel.waitSpans(t, serverSpanName(requiredMethod), 2), idempotency.DecisionLeaseLost)
	if got := eventNames(span); !slices.Contains(got, "idempotency.lease_lost") {
		t.Fatalf("span events %v, want idempotency.lease_lost", got)
	}
	if n := s.tel.counter(t, requiredMethod, idempotency.DecisionLeaseLost); n != 1 {
		t.Fatalf("lease_lost counter %d, want 1", n)
	}
}

// inFlight holds a first call in its handler while a duplicate arrives.
func inFlight(t *testing.T, s *server) {
	t.Helper()
	client := s.Client(t)
	done := make(chan error, 1)
	go func() {
		_, err := client.Required(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "a", Sleep: durationpb.New(300 * time.Millisecond)})
		done <- err
	}()
	s.Service.WaitExecutions(t, 1)
	_, err := client.Required(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "a", Sleep: durationpb.New(300 * time.Millisecond)})
	wantCode(t, err, codes.Aborted)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, s *server, key, payload string) error {
	t.Helper()
	_, err := s.Client(t).Required(withKey(t.Context(), key), &testingv1.DoRequest{Payload: payload})
	return err
}

func mustCall(t *testing.T, s *server, key, payload string) {
	t.Helper()
	if err := call(t, s, key, payload); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
}

// A completion that fails twice and lands on its third attempt is one
// store_error decision, not two, beside the executed one; the store
// histogram records each failed attempt's time once.
func TestObserverStoreErrorCountsSteps(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	const failures = 2
	s.store.FailCompletes(failures)
	if _, err := s.Client(t).Required(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"}); err != nil {
		t.Fatal(err)
	}
	if n := s.store.Count("complete"); n != failures+1 {
		t.Fatalf("%d Complete calls, want %d", n, failures+1)
	}
	if n := s.tel.counter(t, requiredMethod, idempotency.DecisionStoreError); n != 1 {
		t.Errorf("store_error counter %d for one completion retried through %d errors, want 1", n, failures)
	}
	if n := s.tel.counter(t, requiredMethod, idempotency.DecisionExecuted); n != 1 {
		t.Errorf("executed counter %d, want 1", n)
	}
	if count, _ := s.tel.histogram(t, requiredMethod, idempotency.DecisionStoreError); count != failures {
		t.Errorf("store_error histogram has %d observations, want one per failed attempt (%d)", count, failures)
	}
}
