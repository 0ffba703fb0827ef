package redisstore

import (
	"fmt"

	"github.com/grpc-idempotency/idempotency/store"
)

// State values in an entry's "s" field.
const (
	stateInFlight  = "i"
	stateCompleted = "c"
)

// decodeClaimReply turns the reply of claimScript into a Claim; token is
// the token the script was given. Any reply it cannot read, down to a
// stored entry with a missing or unknown field, gives an error wrapping
// [store.ErrCorrupt].
func decodeClaimReply(reply any, token string) (store.Claim, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) == 0 {
		return store.Claim{}, corrupt("unexpected claim reply %s", describe(reply))
	}
	tag, _ := arr[0].(string)
	switch {
	case tag == "new" && len(arr) == 1:
		return store.Claim{Token: token}, nil
	case tag == "type" && len(arr) == 2:
		t, _ := arr[1].(string)
		return store.Claim{}, corrupt("key holds a Redis %q, not an idempotency entry (a hash)", t)
	case tag == "hit" && len(arr) == 4:
		e, err := decodeEntry(arr[1], arr[2], arr[3])
		return store.Claim{Existing: e}, err
	}
	return store.Claim{}, corrupt("unexpected claim reply %s", describe(reply))
}

// decodeEntry reads the s, f and d fields of a stored entry; nil stands
// for a missing field.
func decodeEntry(s, f, d any) (store.Entry, error) {
	state, ok := s.(string)
	if !ok {
		return store.Entry{}, corrupt("entry has no state field %q (got %s)", "s", describe(s))
	}
	fp, ok := f.(string)
	if !ok {
		return store.Entry{}, corrupt("entry has no fingerprint field %q (got %s)", "f", describe(f))
	}
	switch state {
	case stateInFlight:
		return store.Entry{State: store.StateInFlight, Fingerprint: []byte(fp)}, nil
	case stateCompleted:
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
// holds another Redis type.
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
		return fmt.Errorf("%w: %w: key holds a Redis %q, not an idempotency entry (a hash)",
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
