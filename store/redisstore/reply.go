package redisstore

import (
	"fmt"

	"github.com/grpc-idempotency/idempotency/store"
)

// legacyClaim is what legacyClaimScript found.
type legacyClaim struct {
	won   bool        // the script claimed the key
	found bool        // value holds the string found under the key
	value string      // a layout 2 entry found under the key, to decode
	entry store.Entry // a layout 1 entry found under the key
}

// decodeLegacyClaimReply reads the reply of legacyClaimScript. Any reply
// it cannot read, down to a stored hash with a missing or unknown field,
// gives an error wrapping [store.ErrCorrupt].
func decodeLegacyClaimReply(reply any) (legacyClaim, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) == 0 {
		return legacyClaim{}, corrupt("unexpected claim reply %s", describe(reply))
	}
	tag, _ := arr[0].(string)
	switch {
	case tag == "new" && len(arr) == 1:
		return legacyClaim{won: true}, nil
	case tag == "value" && len(arr) == 2:
		if v, ok := arr[1].(string); ok {
			return legacyClaim{found: true, value: v}, nil
		}
	case tag == "type" && len(arr) == 2:
		t, _ := arr[1].(string)
		return legacyClaim{}, corrupt("key holds a Redis %q, not an idempotency entry", t)
	case tag == "hit" && len(arr) == 4:
		e, err := decodeHashEntry(arr[1], arr[2], arr[3])
		return legacyClaim{entry: e}, err
	}
	return legacyClaim{}, corrupt("unexpected claim reply %s", describe(reply))
}

// decodeHashEntry reads the s, f and d fields of a layout 1 entry; nil
// stands for a missing field.
func decodeHashEntry(s, f, d any) (store.Entry, error) {
	state, ok := s.(string)
	if !ok {
		return store.Entry{}, corrupt("entry has no state field %q (got %s)", "s", describe(s))
	}
	fp, ok := f.(string)
	if !ok {
		return store.Entry{}, corrupt("entry has no fingerprint field %q (got %s)", "f", describe(f))
	}
	switch state {
	case string(stateInFlight):
		return store.Entry{State: store.StateInFlight, Fingerprint: []byte(fp)}, nil
	case string(stateCompleted):
		data, ok := d.(string)
		if !ok {
			return store.Entry{}, corrupt("completed entry has no data field %q (got %s)", "d", describe(d))
		}
		return store.Entry{State: store.StateCompleted, Fingerprint: []byte(fp), Data: []byte(data)}, nil
	}
	return store.Entry{}, corrupt("entry has unknown state %q", state)
}

// decodeFencedReply reads the reply of completeScript, releaseScript or
// extendScript: nil for 1, [store.ErrLeaseLost] for 0, and an error
// matching both [store.ErrLeaseLost] and [store.ErrCorrupt] for a key that
// holds a value that is not an entry (the script names its Redis type).
func decodeFencedReply(reply any) error {
	switch v := reply.(type) {
	case int64:
		switch v {
		case 1:
			return nil
		case 0:
			return store.ErrLeaseLost
		}
	case string:
		return fmt.Errorf("%w: %w: key holds a Redis %q that is not an idempotency entry",
			store.ErrLeaseLost, store.ErrCorrupt, v)
	}
	return corrupt("unexpected reply %s", describe(reply))
}

// corrupt returns an error wrapping [store.ErrCorrupt].
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{store.ErrCorrupt}, args...)...)
}

// describe renders a reply value for an error message, bounded in length.
func describe(v any) string {
	s := fmt.Sprintf("%T %v", v, v)
	if v == nil {
		s = "nil"
	}
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return fmt.Sprintf("%q", s)
}
