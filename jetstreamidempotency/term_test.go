package jetstreamidempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestFinalOutcomes: two messages with one business id (HeaderKey). A
// handler's deterministic error (a stored code) is stored, and the
// delivery that ran is terminated with the error as the reason, which
// JetStream announces in a MSG_TERMINATED advisory; the second message
// gets the stored error without running and is terminated too (or both
// are acked, with WithAckStoredErrors). The id reused for another body is
// refused with ErrKeyReused and terminated. WithConn gives the Processor
// the server's version, 2.10.4 or later, so each Term carries its reason.
func TestFinalOutcomes(t *testing.T) {
	t.Parallel()
	errNoProduct := status.Error(codes.InvalidArgument, "no such product")
	tests := []struct {
		name        string
		opts        []jetstreamidempotency.Option
		handlerErr  error
		secondBody  string
		want        [2]jetstreamidempotency.Action
		wantSecond  error // the second message's error
		wantReasons []string
	}{
		{
			name: "stored error terminated", handlerErr: errNoProduct, secondBody: "order-7",
			want: [2]jetstreamidempotency.Action{jetstreamidempotency.Term, jetstreamidempotency.Term}, wantSecond: errNoProduct,
			wantReasons: []string{errNoProduct.Error(), errNoProduct.Error()},
		},
		{
			name: "stored error acked", opts: []jetstreamidempotency.Option{jetstreamidempotency.WithAckStoredErrors()},
			handlerErr: errNoProduct, secondBody: "order-7",
			want: [2]jetstreamidempotency.Action{jetstreamidempotency.Ack, jetstreamidempotency.Ack}, wantSecond: errNoProduct,
		},
		{
			name: "id reused for another body", secondBody: "order-7, another product",
			want: [2]jetstreamidempotency.Action{jetstreamidempotency.Ack, jetstreamidempotency.Term}, wantSecond: idempotency.ErrKeyReused,
			wantReasons: []string{"ErrKeyReused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			srv, res := testkit.NewConsumerServer(t), newResults()
			js, nc := b.connectConn()
			advisories, err := nc.SubscribeSync(server.JSAdvisoryConsumerMsgTerminatedPre + "." + stream + "." + durable)
			if err != nil {
				t.Fatal(err)
			}
			var runs int
			p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(context.Context, jetstream.Msg) error {
				runs++
				return tt.handlerErr
			}, append(tt.opts, jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithConn(nc), jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")))...)
			consume(t, p, b.consumer(js, ackWait, -1))
			b.publish(js, "order-7", jetstream.MsgIDHeader, "m1", "Order-Id", "7")
			first, _ := res.Wait(t, "of the first message", func(jetstreamidempotency.Result) bool { return true })
			b.publish(js, tt.secondBody, jetstream.MsgIDHeader, "m2", "Order-Id", "7")
			second, _ := res.Wait(t, "of the second message", func(jetstreamidempotency.Result) bool { return true })

			if first.Delivery != 1 || !first.Ran || !errors.Is(first.Err, tt.handlerErr) || first.Action != tt.want[0] {
				t.Errorf("first: %+v; want delivery 1, run, %v, %v", first, tt.handlerErr, tt.want[0])
			}
			if second.Ran || second.Action != tt.want[1] || !sameError(second.Err, tt.wantSecond) {
				t.Errorf("second: %+v; want not run, %v, %v", second, tt.wantSecond, tt.want[1])
			}
			if runs != 1 {
				t.Errorf("handler ran %d times, want 1", runs)
			}
			for _, want := range tt.wantReasons {
				m, err := advisories.NextMsg(testkit.ConsumerWait)
				if err != nil {
					t.Fatalf("no MSG_TERMINATED advisory: %v", err)
				}
				var adv server.JSConsumerDeliveryTerminatedAdvisory
				if err := json.Unmarshal(m.Data, &adv); err != nil {
					t.Fatal(err)
				}
				if want == "ErrKeyReused" {
					want = second.Err.Error()
				}
				if adv.Reason != want {
					t.Errorf("advisory reason %q, want %q", adv.Reason, want)
				}
			}
		})
	}
}

// sameError reports whether got is want: the same sentinel, or a gRPC
// status with the same code and message.
func sameError(got, want error) bool {
	if errors.Is(got, want) {
		return true
	}
	g, gok := status.FromError(got)
	w, wok := status.FromError(want)
	return gok && wok && g.Code() == w.Code() && g.Message() == w.Message()
}
