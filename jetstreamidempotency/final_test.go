package jetstreamidempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestFinalNotRedelivered: a message settled as final (a stored error, or
// no key) is never delivered again, on the embedded server and on the
// machine's nats-server binary (Debian 12's is 2.9.10, which ignores
// TermWithReason): after the Term the consumer holds nothing pending, and
// no delivery comes back within several AckWaits. Its MSG_TERMINATED
// advisory carries the error as its reason when WithConn says the server
// is 2.10.4 or later, and no reason otherwise. What is expected of the
// advisory follows the version the server reports, not the machine it is
// expected on: a machine whose nats-server binary is 2.10.4 or later
// (a later Debian, NATS's own package) answers the binary's WithConn runs
// with a reason.
func TestFinalNotRedelivered(t *testing.T) {
	t.Parallel()
	brokers := []struct {
		name  string
		start func(*testing.T) *broker
	}{
		{"embedded", startBroker},
		{"binary", startBinaryBroker},
	}
	messages := []struct {
		name    string
		headers []string
	}{
		{"stored error", []string{"Order-Id", "7"}},
		{"no key", nil},
	}
	for _, br := range brokers {
		for _, m := range messages {
			for _, withConn := range []bool{false, true} {
				name := br.name + "/" + m.name
				if withConn {
					name += "/WithConn"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					const wait = 500 * time.Millisecond
					b := br.start(t)
					srv, res := testkit.NewConsumerServer(t), newResults()
					js, nc := b.connectConn()
					advisories, err := nc.SubscribeSync(server.JSAdvisoryConsumerMsgTerminatedPre + "." + stream + "." + durable)
					if err != nil {
						t.Fatal(err)
					}
					opts := []jetstreamidempotency.Option{jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id"))}
					if withConn {
						opts = append(opts, jetstreamidempotency.WithConn(nc))
					}
					p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(context.Context, jetstream.Msg) error {
						return status.Error(codes.InvalidArgument, "no such product")
					}, opts...)
					cons := b.consumer(js, wait, -1)
					consume(t, p, cons)
					b.publish(js, "order-7", m.headers...)
					first, _ := res.Wait(t, "of the message", func(jetstreamidempotency.Result) bool { return true })
					if first.Action != jetstreamidempotency.Term || first.SettleErr != nil {
						t.Fatalf("first delivery: %+v; want Term", first)
					}
					info := waitSettled(t, cons, 4*wait)
					if info.NumRedelivered != 0 {
						t.Errorf("consumer info %+v: the terminated message was redelivered", info)
					}
					if again := res.Drain(); len(again) != 0 {
						t.Errorf("delivered again: %+v", again)
					}
					adv, err := advisories.NextMsg(testkit.ConsumerWait)
					if err != nil {
						t.Fatalf("no MSG_TERMINATED advisory: %v", err)
					}
					var got server.JSConsumerDeliveryTerminatedAdvisory
					if err := json.Unmarshal(adv.Data, &got); err != nil {
						t.Fatal(err)
					}
					want := ""
					if version := nc.ConnectedServerVersion(); withConn && termsWithReason(t, version) {
						want = first.Err.Error()
					} else if br.name == "binary" && termsWithReason(t, version) {
						t.Logf("the nats-server binary is %s: a server before 2.10.4 is not tested on this machine", version)
					}
					if got.Reason != want {
						t.Errorf("advisory reason %q, want %q", got.Reason, want)
					}
				})
			}
		}
	}
}

// waitSettled polls cons's info until no message is pending an ack or
// delivery, failing the test after limit (a few AckWaits: a message still
// pending then has been redelivered).
func waitSettled(t *testing.T, cons jetstream.Consumer, limit time.Duration) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		info, err := cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the message is still pending: ack pending %d, redelivered %d", limit, info.NumAckPending, info.NumRedelivered)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// termsWithReason reports whether a server of version ("2.9.10",
// "2.11.0-beta.1") honours TermWithReason: 2.10.4 and later, pre-releases
// of 2.10.4 itself excepted.
func termsWithReason(t *testing.T, version string) bool {
	t.Helper()
	base, pre, _ := strings.Cut(version, "-")
	var v [3]int
	if n, err := fmt.Sscanf(base, "%d.%d.%d", &v[0], &v[1], &v[2]); n != 3 || err != nil {
		t.Fatalf("server version %q: %v", version, err)
	}
	switch first := [3]int{2, 10, 4}; {
	case v == first:
		return pre == ""
	case v[0] != first[0]:
		return v[0] > first[0]
	case v[1] != first[1]:
		return v[1] > first[1]
	default:
		return v[2] > first[2]
	}
}
