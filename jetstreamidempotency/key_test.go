package jetstreamidempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestMsgKey: the default key is the publisher's Nats-Msg-Id, or the
// stream and stream sequence of a message published without one; an id
// that is not a valid idempotency key is replaced by its SHA-256.
func TestMsgKey(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	long := strings.Repeat("x", 300)
	sum := sha256.Sum256([]byte("msg-id:" + long))
	tests := []struct {
		name    string
		headers []string
		want    string
	}{
		{"msg id", []string{jetstream.MsgIDHeader, "m1"}, "msg-id:m1"},
		{"no msg id", nil, "stream-seq:ORDERS:2"},
		{"msg id too long", []string{jetstream.MsgIDHeader, long}, "sha256:" + hex.EncodeToString(sum[:])},
	}
	js := b.connect()
	for _, tt := range tests {
		b.publish(js, tt.name, tt.headers...)
	}
	p := jetstreamidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(context.Context, jetstream.Msg) error { return nil })
	got, err := p.Fetch(t.Context(), b.consumer(js, ackWait, -1), len(tests), jetstream.FetchMaxWait(testkit.ConsumerWait))
	if err != nil || len(got) != len(tests) {
		t.Fatalf("fetch: %d results, %v; want %d", len(got), err, len(tests))
	}
	for i, tt := range tests {
		if got[i].Key != tt.want || got[i].Action != jetstreamidempotency.Ack {
			t.Errorf("%s: key %q, %v; want %q, ack", tt.name, got[i].Key, got[i].Action, tt.want)
		}
	}
}

// TestHeaderKey: HeaderKey("Order-Id") keys a message as "Order-Id:" and
// the header's value, hashed when that is not a valid idempotency key; a
// message without the header, or with it under another case, has no key
// and is terminated.
func TestHeaderKey(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	long := strings.Repeat("7", 300)
	sum := sha256.Sum256([]byte("Order-Id:" + long))
	tests := []struct {
		name    string
		headers []string
		want    string // "" for none
		action  jetstreamidempotency.Action
	}{
		{"business id", []string{"Order-Id", "7"}, "Order-Id:7", jetstreamidempotency.Ack},
		{"business id too long", []string{"Order-Id", long}, "sha256:" + hex.EncodeToString(sum[:]), jetstreamidempotency.Ack},
		{"another case", []string{"order-id", "7"}, "", jetstreamidempotency.Term},
		{"no header", []string{jetstream.MsgIDHeader, "m1"}, "", jetstreamidempotency.Term},
	}
	js := b.connect()
	for _, tt := range tests {
		b.publish(js, tt.name, tt.headers...)
	}
	p := jetstreamidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(context.Context, jetstream.Msg) error { return nil },
		jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")))
	got, err := p.Fetch(t.Context(), b.consumer(js, ackWait, -1), len(tests), jetstream.FetchMaxWait(testkit.ConsumerWait))
	if err != nil || len(got) != len(tests) {
		t.Fatalf("fetch: %d results, %v; want %d", len(got), err, len(tests))
	}
	for i, tt := range tests {
		if got[i].Key != tt.want || got[i].Action != tt.action {
			t.Errorf("%s: key %q, %v; want %q, %v", tt.name, got[i].Key, got[i].Action, tt.want, tt.action)
		}
	}
}
