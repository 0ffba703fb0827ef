package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// The transactional-completion protocol of TxOutcome, store-agnostic: the
// handler writes the outcome itself (here with the memory store underneath
// the counting fault store, standing in for a write inside the handler's
// transaction), and the interceptor makes no store call for it.
// store/postgresstore proves the same with a real transaction.
func TestTxOutcomeProtocol(t *testing.T) {
	t.Parallel()
	declined := status.Error(codes.FailedPrecondition, "card declined")
	cases := []struct {
		name      string
		recordErr error // the outcome the transaction records: nil for the response
		returnErr error // what the handler returns afterwards
		wantCode  codes.Code
		releases  int
	}{
		{"response recorded and returned", nil, nil, codes.OK, 0},
		{"declined recorded and returned", declined, declined, codes.FailedPrecondition, 0},
		// The commit failed after it may have landed: the handler returns a
		// retryable error, the fenced release finds the committed record
		// and leaves it, and the retry replays it.
		{"ambiguous commit", nil, status.Error(codes.Unavailable, "commit: connection lost"), codes.OK, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var f *fixture
			f = newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				resp, _ := testserver.Echo(ctx, m, req)
				o, err := idempotency.NewTxOutcome(ctx, resp, tc.recordErr)
				if err != nil {
					return nil, err
				}
				if err := f.Faults.Store.Complete(ctx, o.StoreKey, o.Token, o.Data, o.Retention); err != nil {
					return nil, err
				}
				o.Recorded()
				if tc.returnErr != nil {
					return nil, tc.returnErr
				}
				return resp, nil
			})
			ctx := withKey(t.Context(), "k-tx")
			_, _ = f.Client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
			resp, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("retry: %v, want %v", err, tc.wantCode)
			}
			if tc.wantCode == codes.OK && resp.GetPayload() != "p" {
				t.Fatalf("retry: %v, want the recorded response", resp)
			}
			if n := f.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			if n := f.Faults.Count("complete"); n != 0 {
				t.Fatalf("interceptor made %d Complete calls for an outcome the transaction recorded", n)
			}
			if n := f.Faults.Count("release"); n != tc.releases {
				t.Fatalf("%d releases, want %d", n, tc.releases)
			}
			if n := f.Events.Count(idempotency.DecisionReplayed); n != 1 {
				t.Fatalf("%d replays, want 1", n)
			}
		})
	}
}

// TestTxOutcomeRefusals: no claim, or an error that is not stored.
func TestTxOutcomeRefusals(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 2)
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, _ := testserver.Echo(ctx, m, req)
		if req.GetPayload() == "retryable" {
			_, err := idempotency.NewTxOutcome(ctx, nil, status.Error(codes.Unavailable, "x"))
			errs <- err
		} else {
			_, err := idempotency.NewTxOutcome(ctx, resp, nil)
			errs <- err
		}
		return resp, nil
	})
	if _, err := f.Client.Do(t.Context(), &testingv1.DoRequest{Payload: "no key"}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, idempotency.ErrNoClaim) {
		t.Fatalf("without a key: %v, want ErrNoClaim", err)
	}
	if _, err := f.Client.Do(withKey(t.Context(), "k-r"), &testingv1.DoRequest{Payload: "retryable"}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err == nil {
		t.Fatal("a retryable error was accepted as a transactional outcome")
	}
}

// TestTxOutcomeRetriedTransaction: a handler that retries its transaction
// builds an outcome per attempt. The first attempt records a response and
// rolls back; the second returns a stored error without recording it. The
// interceptor must store that error (the rolled-back record is not there,
// and the key would otherwise stay in flight until its lease ends), and
// the record must hold nothing of the first attempt's outcome.
func TestTxOutcomeRetriedTransaction(t *testing.T) {
	t.Parallel()
	declined := status.Error(codes.FailedPrecondition, "card declined")
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, _ := testserver.Echo(ctx, m, req)
		o, err := idempotency.NewTxOutcome(ctx, resp, nil)
		if err != nil {
			return nil, err
		}
		o.Recorded() // written in a transaction that then rolls back
		o, err = idempotency.NewTxOutcome(ctx, nil, declined)
		if err != nil {
			return nil, err
		}
		var rec recordv1.Record
		if err := proto.Unmarshal(o.Data, &rec); err != nil {
			t.Errorf("second outcome: %v", err)
		} else if rec.GetOutcome() != recordv1.Outcome_OUTCOME_ERROR || rec.GetResponseType() != "" || rec.GetResponse() != nil {
			t.Errorf("second outcome holds %v, response type %q, %d response bytes; want the error alone", rec.GetOutcome(), rec.GetResponseType(), len(rec.GetResponse()))
		}
		return nil, declined // the second attempt commits without recording
	})
	ctx := withKey(t.Context(), "k-tx-retried")
	for i := range 2 {
		_, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" {
			t.Fatalf("call %d: %v, want the declined error", i, err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := f.Faults.Count("complete"); n != 1 {
		t.Fatalf("%d Complete calls, want the interceptor's 1", n)
	}
	if n := f.Events.Count(idempotency.DecisionReplayed); n != 1 {
		t.Fatalf("%d replays, want 1", n)
	}
}
