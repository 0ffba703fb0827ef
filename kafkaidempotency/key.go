package kafkaidempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
)

// KeyFunc returns the idempotency key of a record: the same on every
// delivery of the record, and different for every other record. An error
// means the record has no key: it is final, dead-lettered.
type KeyFunc func(*kgo.Record) (string, error)

// OffsetKey is the default key of a record: its topic, partition and
// offset, as "topic/partition/offset" ("orders/3/1042"). Every redelivery
// of the record keeps it, across rebalances and restarts. A producer that
// retries a send without the idempotent producer writes the record again
// at another offset, and the offsets of a topic deleted and created again
// start over, finding the old topic's outcomes within the retention: key
// on a business id ([HeaderKey]) then. A key that is not a valid
// idempotency key (a topic name near Kafka's 249-byte limit) is replaced
// by its SHA-256.
func OffsetKey(rec *kgo.Record) (string, error) {
	return validKey(rec.Topic + "/" + strconv.FormatInt(int64(rec.Partition), 10) + "/" + strconv.FormatInt(rec.Offset, 10)), nil
}

// HeaderKey returns a key function that keys a record on the value of its
// header name (the first one of that name): a business id (an order id, a
// payment id) that stays the same when the producer sends the same fact
// twice. A record without the header has no key and is dead-lettered. The
// value is still the request the key stands for: two records with the id
// and different values are refused with [idempotency.ErrKeyReused].
//
// The key is name, a colon and the header's value, "Name:value":
// HeaderKey("Order-Id") keys a record whose Order-Id header is 7 as
// "Order-Id:7"; a key that is not a valid idempotency key (over 255
// bytes, or outside printable ASCII) is replaced by its SHA-256. Header
// names are case-sensitive, and name is part of every key: a consumer
// moved to another name, or another key function, finds none of the
// outcomes stored under its old keys. HeaderKey panics when name is empty.
func HeaderKey(name string) KeyFunc {
	if name == "" {
		panic("kafkaidempotency: HeaderKey: the header name is empty")
	}
	return func(rec *kgo.Record) (string, error) {
		for _, h := range rec.Headers {
			if h.Key == name && len(h.Value) > 0 {
				return validKey(name + ":" + string(h.Value)), nil
			}
		}
		return "", fmt.Errorf("no %s header", name)
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
