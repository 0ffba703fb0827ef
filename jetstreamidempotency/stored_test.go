package jetstreamidempotency_test

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestStoredOutcomeFinal: the idempotency server's stored codes, not the
// Processor's, decide whether a handler error is final. An error the
// server stores is final on the delivery that ran it (Term, or Ack with
// WithAckStoredErrors), whatever its code: DATA_LOSS, which only this
// server stores, as much as a default code. An error whose code the
// server does not store, a default code among them, released the claim:
// it is nakked and its redelivery runs the handler again.
func TestStoredOutcomeFinal(t *testing.T) {
	t.Parallel()
	errTruncated := status.Error(codes.DataLoss, "the order record is truncated")
	errNoStock := status.Error(codes.FailedPrecondition, "out of stock")
	type delivery struct {
		ran    bool
		err    error
		action jetstreamidempotency.Action
	}
	tests := []struct {
		name        string
		serverCodes []codes.Code
		opts        []jetstreamidempotency.Option
		errs        []error // the handler's error on its first, second, ... run
		want        []delivery
	}{
		{
			name:        "a code only the server stores is terminated",
			serverCodes: append(slices.Clone(idempotency.DefaultStoredCodes), codes.DataLoss),
			errs:        []error{errTruncated},
			want:        []delivery{{true, errTruncated, jetstreamidempotency.Term}},
		},
		{
			name:        "a code only the server stores is acked",
			serverCodes: []codes.Code{codes.DataLoss},
			opts:        []jetstreamidempotency.Option{jetstreamidempotency.WithAckStoredErrors()},
			errs:        []error{errTruncated},
			want:        []delivery{{true, errTruncated, jetstreamidempotency.Ack}},
		},
		{
			name:        "a default code the server stores is terminated",
			serverCodes: idempotency.DefaultStoredCodes,
			errs:        []error{errNoStock},
			want:        []delivery{{true, errNoStock, jetstreamidempotency.Term}},
		},
		{
			name:        "a default code the server does not store runs again",
			serverCodes: []codes.Code{codes.InvalidArgument},
			errs:        []error{errNoStock, nil},
			want:        []delivery{{true, errNoStock, jetstreamidempotency.Nak}, {true, nil, jetstreamidempotency.Ack}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			srv := testkit.NewConsumerServer(t, idempotency.WithStoredCodes(tt.serverCodes...))
			res := newResults()
			runs := 0
			p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(context.Context, jetstream.Msg) error {
				runs++ // one message, one delivery at a time: no lock needed, and -race checks it
				return tt.errs[min(runs, len(tt.errs))-1]
			}, append(tt.opts, jetstreamidempotency.WithResults(res.Add))...)
			js := b.connect()
			// MaxDeliver one past the deliveries wanted: a processor that naks
			// a final outcome shows it in the last one.
			consume(t, p, b.consumer(js, ackWait, len(tt.want)+1))
			b.publish(js, "order-7", jetstream.MsgIDHeader, "m1")

			for i, want := range tt.want {
				got, _ := res.Wait(t, "of a delivery", func(jetstreamidempotency.Result) bool { return true })
				if got.Delivery != uint64(i+1) || got.Ran != want.ran || !sameError(got.Err, want.err) || got.Action != want.action || got.SettleErr != nil {
					t.Fatalf("delivery %d: %+v; want ran %t, error %v, %v", i+1, got, want.ran, want.err, want.action)
				}
			}
			if wantRuns := len(tt.errs); runs != wantRuns {
				t.Fatalf("the handler ran %d times, want %d", runs, wantRuns)
			}
		})
	}
}
