package watermillidempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/grpc-idempotency/idempotency"
)

// KeyFunc returns the idempotency key of a message: the same on every
// delivery of the message, and different for every other message. An
// error means the message has no key: it is final, dead-lettered and
// acked.
type KeyFunc func(*message.Message) (string, error)

// UUIDKey is the default key of a message: its UUID, which the publisher
// sets and every delivery of the message keeps (watermill's marshalers
// carry it in a header). A publisher that retries a publish with the same
// message keeps it too; one that builds the message again with a new UUID
// does not: key on a business id ([MetadataKey]) then. A message without
// a UUID has no key. A UUID that is not a valid idempotency key (over 255
// bytes, or outside printable ASCII) is replaced by its SHA-256.
func UUIDKey(msg *message.Message) (string, error) {
	if msg.UUID == "" {
		return "", errors.New("the message has no UUID")
	}
	return validKey(msg.UUID), nil
}

// MetadataKey returns a key function that keys a message on the value of
// its metadata entry name: a business id (an order id, a payment id) that
// stays the same when a producer publishes the same fact twice. A message
// without the entry has no key and is dead-lettered. The payload is still
// the request the key stands for: two messages with the id and different
// payloads are refused with [idempotency.ErrKeyReused].
//
// The key is name, a colon and the value, "name:value":
// MetadataKey("order_id") keys a message whose order_id is 7 as
// "order_id:7"; a key that is not a valid idempotency key is replaced by
// its SHA-256. name is part of every key: a consumer moved to another name,
// or another key function, finds none of the outcomes stored under its old
// keys. MetadataKey panics when name is empty.
func MetadataKey(name string) KeyFunc {
	if name == "" {
		panic("watermillidempotency: MetadataKey: the metadata name is empty")
	}
	return func(msg *message.Message) (string, error) {
		v := msg.Metadata.Get(name)
		if v == "" {
			return "", fmt.Errorf("no %s metadata", name)
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
