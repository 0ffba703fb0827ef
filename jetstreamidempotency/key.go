package jetstreamidempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
)

// KeyFunc returns the idempotency key of a message: the same on every
// delivery of the message, and different for every other message. An
// error means the message has no key; it is terminated.
type KeyFunc func(jetstream.Msg) (string, error)

// MsgKey is the default key of a message: "msg-id:" and its Nats-Msg-Id
// header when the publisher set one, else "stream-seq:" and the stream's
// name and the message's stream sequence.
//
// The Nats-Msg-Id is the publisher's id of the message: it is the same on
// every redelivery and on a publisher's retried publish, which JetStream
// itself drops only within the stream's Duplicates window (two minutes by
// default); the consumer then drops a retry that comes later. The stream
// sequence numbers the stored message: every redelivery keeps it, but a
// publish retried outside the window is a new message with a new one.
// Publish with a Msg-Id. An id that is not a valid idempotency key (over
// 255 bytes, or outside printable ASCII) is replaced by its SHA-256.
func MsgKey(msg jetstream.Msg) (string, error) {
	if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
		return validKey("msg-id:" + id), nil
	}
	md, err := msg.Metadata()
	if err != nil {
		return "", err
	}
	return validKey("stream-seq:" + md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)), nil
}

// HeaderKey returns a key function that keys a message on the value of
// its header name: a business id (an order id, a payment id) that stays
// the same when the producer publishes the same fact twice as two
// messages, with two Msg-Ids. A message without the header has no key and
// is terminated. The body is still the request the key stands for: two
// messages with the id and different bodies are refused with
// [idempotency.ErrKeyReused]. HeaderKey panics when name is empty.
//
// The key is name, a colon and the header's value, "Name:value":
// HeaderKey("Order-Id") keys a message whose Order-Id header is 7 as
// "Order-Id:7"; a key that is not a valid idempotency key (over 255
// bytes, or outside printable ASCII) is replaced by its SHA-256, as in
// [MsgKey]. NATS header names are case-sensitive ("order-id" is another
// header), and name is part of every key: a consumer moved to another
// name, or another key function, finds none of the outcomes stored under
// its old keys, and runs their messages again when they come back.
func HeaderKey(name string) KeyFunc {
	if name == "" {
		panic("jetstreamidempotency: HeaderKey: the header name is empty")
	}
	return func(msg jetstream.Msg) (string, error) {
		v := msg.Headers().Get(name)
		if v == "" {
			return "", fmt.Errorf("no %s header", name)
		}
		return validKey(name + ":" + v), nil
	}
}

// validKey returns k, or "sha256:" and the hex of its SHA-256 when k is
// not a valid idempotency key.
func validKey(k string) string {
	if idempotency.ValidateKey(k) == nil {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}
