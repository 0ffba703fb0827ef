package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// delivery is one consumer delivery through Do: what Server.Settle is
// given.
type delivery struct {
	ran, replayed bool
	err           error
}

// deliver runs Do for one delivery of body under key, as a consumer
// does: fn is the handler, ran is set inside the function.
func deliver(ctx context.Context, s *idempotency.Server, op, key, body string, fn func(context.Context) error) delivery {
	var d delivery
	_, d.replayed, d.err = idempotency.Do(ctx, s, op, key, wrapperspb.String(body), func(ctx context.Context) (*emptypb.Empty, error) {
		d.ran = true
		return &emptypb.Empty{}, fn(ctx)
	})
	return d
}

func succeed(context.Context) error { return nil }

func fail(err error) func(context.Context) error {
	return func(context.Context) error { return err }
}

// Server.Settle maps every outcome of Do to one settlement, over real Do
// calls on a memory store (decision 150): a stored outcome is acked, or
// rejected when it is an error, whatever its code once replayed; an error
// of a run that the server does not store is retried now, even when it
// wraps one of the library's sentinels; the key in flight, the store down
// or full and a failing scope function are retried later; a reused key,
// a corrupt record and a missing or invalid key are rejected, and so is a
// key whose claim was abandoned and that the server blocks, or whose
// recovery panicked (ErrOutcomeUnknown, decision 302), while a recovery's
// retryable error is retried later; a context that ended before the run is
// retried now. A recovery's error that the server stores is rejected on
// the delivery that recovered it, as the handler's would be, while a scope
// function's status of a stored code is still retried later.
func TestSettle(t *testing.T) {
	t.Parallel()
	stored := status.Error(codes.InvalidArgument, "no such product")
	storedElsewhere := status.Error(codes.DataLoss, "stored by this server only")
	tests := []struct {
		name string
		opts []idempotency.ServerOption
		// deliver runs the deliveries before the one settled, then it.
		deliver func(t *testing.T, f *fixture) delivery
		want    idempotency.Settlement
	}{
		{"run, nil", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleAck},
		{"replayed nil", nil, func(t *testing.T, f *fixture) delivery {
			deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(errors.New("must not run")))
		}, idempotency.SettleAck},
		{"run, stored error", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(stored))
		}, idempotency.SettleReject},
		{"run, error stored by WithStoredCodes", []idempotency.ServerOption{idempotency.WithStoredCodes(codes.DataLoss)}, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(storedElsewhere))
		}, idempotency.SettleReject},
		{"replayed stored error", nil, func(t *testing.T, f *fixture) delivery {
			deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(stored))
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleReject},
		{"run, retryable error", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(status.Error(codes.Unavailable, "warehouse down")))
		}, idempotency.SettleRetry},
		{"run, default code the server does not store", []idempotency.ServerOption{idempotency.WithStoredCodes(codes.DataLoss)}, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(stored))
		}, idempotency.SettleRetry},
		{"run, a nested call's ErrKeyReused", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", fail(fmt.Errorf("charging: %w", idempotency.ErrKeyReused)))
		}, idempotency.SettleRetry},
		{"key in flight", nil, func(t *testing.T, f *fixture) delivery {
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan delivery)
			go func() {
				done <- deliver(t.Context(), f.Idempotency, "op", "k", "b", func(context.Context) error {
					close(started)
					<-release
					return nil
				})
			}()
			<-started
			d := deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
			close(release)
			if first := <-done; first.err != nil {
				t.Errorf("the first delivery: %v", first.err)
			}
			return d
		}, idempotency.SettleRetryLater},
		{"store down", nil, func(t *testing.T, f *fixture) delivery {
			f.Faults.Down.Store(true)
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleRetryLater},
		{"store full", nil, func(t *testing.T, f *fixture) delivery {
			f.Faults.Full.Store(true)
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleRetryLater},
		{"scope function fails", []idempotency.ServerOption{idempotency.WithScope(func(context.Context) (string, error) {
			return "", errors.New("tenants db: connection refused")
		})}, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleRetryLater},
		{"key reused", nil, func(t *testing.T, f *fixture) delivery {
			deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
			return deliver(t.Context(), f.Idempotency, "op", "k", "another body", succeed)
		}, idempotency.SettleReject},
		{"record corrupt", nil, func(t *testing.T, f *fixture) delivery {
			f.Faults.CorruptData.Store(true)
			deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleReject},
		{"key missing", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "", "b", succeed)
		}, idempotency.SettleReject},
		{"key invalid", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "key\n", "b", succeed)
		}, idempotency.SettleReject},
		{"no operation", nil, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "", "k", "b", succeed)
		}, idempotency.SettleReject},
		{"key abandoned, blocked", []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)}, func(t *testing.T, f *fixture) delivery {
			testkit.Abandon(t, f.Store, f.Idempotency, "op", "op", "k", wrapperspb.String("b"))
			d := deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
			if d.ran || !errors.Is(d.err, idempotency.ErrOutcomeUnknown) {
				t.Fatalf("ran %v, %v; want ErrOutcomeUnknown without a run", d.ran, d.err)
			}
			return d
		}, idempotency.SettleReject},
		{"key abandoned, recovery panics", []idempotency.ServerOption{idempotency.WithOperationPolicy("op", idempotency.MethodPolicy{
			Abandoned: idempotency.AbandonRecover,
			Recover:   func(context.Context, proto.Message) (proto.Message, error) { panic("ledger unreadable") },
		})}, func(t *testing.T, f *fixture) delivery {
			testkit.Abandon(t, f.Store, f.Idempotency, "op", "op", "k", wrapperspb.String("b"))
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleReject},
		{"key abandoned, recovery fails retryably", []idempotency.ServerOption{idempotency.WithOperationPolicy("op", idempotency.MethodPolicy{
			Abandoned: idempotency.AbandonRecover,
			Recover: func(context.Context, proto.Message) (proto.Message, error) {
				return nil, status.Error(codes.Unavailable, "ledger down")
			},
		})}, func(t *testing.T, f *fixture) delivery {
			testkit.Abandon(t, f.Store, f.Idempotency, "op", "op", "k", wrapperspb.String("b"))
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleRetryLater},
		{"key abandoned, recovery finds a stored error", []idempotency.ServerOption{idempotency.WithOperationPolicy("op", idempotency.MethodPolicy{
			Abandoned: idempotency.AbandonRecover,
			Recover:   func(context.Context, proto.Message) (proto.Message, error) { return nil, stored },
		})}, func(t *testing.T, f *fixture) delivery {
			testkit.Abandon(t, f.Store, f.Idempotency, "op", "op", "k", wrapperspb.String("b"))
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleReject},
		{"scope function fails with a code the server stores", []idempotency.ServerOption{idempotency.WithScope(func(context.Context) (string, error) {
			return "", status.Error(codes.PermissionDenied, "no tenant")
		})}, func(t *testing.T, f *fixture) delivery {
			return deliver(t.Context(), f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleRetryLater},
		{"context ended before the run", nil, func(t *testing.T, f *fixture) delivery {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return deliver(ctx, f.Idempotency, "op", "k", "b", succeed)
		}, idempotency.SettleRetry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, tc.opts...)
			d := tc.deliver(t, f)
			if got := f.Idempotency.Settle(d.ran, d.replayed, d.err); got != tc.want {
				t.Fatalf("Settle(ran %v, replayed %v, %v) = %v, want %v", d.ran, d.replayed, d.err, got, tc.want)
			}
		})
	}
}

func TestSettlementString(t *testing.T) {
	t.Parallel()
	for s, want := range map[idempotency.Settlement]string{
		idempotency.SettleAck: "ack", idempotency.SettleRetry: "retry", idempotency.SettleRetryLater: "retry later",
		idempotency.SettleReject: "reject", 0: "Settlement(0)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Settlement(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}
