// Package record encodes and decodes the outcome records the interceptor
// keeps in a store. Decode treats its input as untrusted.
package record

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// Version is the record format version this package writes. Version 2
// keeps metadata values and the status message as bytes, so outcomes with
// binary metadata or a status message that is not UTF-8 can be stored.
const Version = 2

// MinVersion is the oldest format version Decode reads. Version 1 records
// decode as version 2 records: the two differ only in fields declared
// string in version 1 and bytes in version 2, which share one encoding.
const MinVersion = 1

// ErrUnreadable is wrapped by every Decode error.
var ErrUnreadable = errors.New("record unreadable")

var marshalOptions = proto.MarshalOptions{Deterministic: true}

// Encode returns the deterministic encoding of r.
func Encode(r *recordv1.Record) ([]byte, error) {
	return marshalOptions.Marshal(r)
}

// Decode parses data and checks that it is a completed record of a known
// version, consistent with its outcome, for the given fingerprint.
func Decode(data, fingerprint []byte) (*recordv1.Record, error) {
	r := &recordv1.Record{}
	if err := DecodeInto(r, nil, nil, data, fingerprint); err != nil {
		return nil, err
	}
	return r, nil
}

// DecodeInto is [Decode] into r, which it resets first. When created and
// completed are not nil, the record's timestamps are decoded into them, so
// that a caller that keeps them in place allocates neither; a timestamp
// the record does not hold is then nil in r, as with Decode (a zero
// timestamp reads as absent: no record is created or completed at the Unix
// epoch).
func DecodeInto(r *recordv1.Record, created, completed *timestamppb.Timestamp, data, fingerprint []byte) error {
	r.Reset()
	if created != nil && completed != nil {
		created.Reset()
		completed.Reset()
		r.CreatedAt, r.CompletedAt = created, completed
	}
	if err := merge.Unmarshal(data, r); err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if isZero(r.CreatedAt) {
		r.CreatedAt = nil
	}
	if isZero(r.CompletedAt) {
		r.CompletedAt = nil
	}
	if err := validate(r, fingerprint); err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	return nil
}

// merge decodes into the timestamps a record already points to.
var merge = proto.UnmarshalOptions{Merge: true}

func isZero(ts *timestamppb.Timestamp) bool {
	return ts != nil && ts.GetSeconds() == 0 && ts.GetNanos() == 0
}

func validate(r *recordv1.Record, fingerprint []byte) error {
	switch {
	case r.GetVersion() < MinVersion || r.GetVersion() > Version:
		return fmt.Errorf("format version %d, want %d to %d", r.GetVersion(), MinVersion, Version)
	case r.GetState() != recordv1.State_STATE_COMPLETED:
		return fmt.Errorf("state %v, want completed", r.GetState())
	case !bytes.Equal(r.GetFingerprint(), fingerprint):
		return errors.New("fingerprint does not match the store entry")
	}
	switch r.GetOutcome() {
	case recordv1.Outcome_OUTCOME_RESPONSE:
		if r.GetResponseType() == "" {
			return errors.New("response record without a response type")
		}
	case recordv1.Outcome_OUTCOME_ERROR:
		if r.GetStatus().GetCode() == 0 {
			return errors.New("error record without an error code")
		}
		if c := r.GetStatus().GetCode(); c < 0 || c > 16 {
			return fmt.Errorf("error record with unknown code %d", c)
		}
	case recordv1.Outcome_OUTCOME_STREAM:
		if r.GetResponseType() == "" {
			return errors.New("stream record without a message type")
		}
		if c := r.GetStatus().GetCode(); c < 0 || c > 16 {
			return fmt.Errorf("stream record with unknown code %d", c)
		}
	case recordv1.Outcome_OUTCOME_NOT_RETAINED:
	default:
		return fmt.Errorf("unknown outcome %v", r.GetOutcome())
	}
	return nil
}

// AppendEncode appends the deterministic encoding of r to b.
func AppendEncode(b []byte, r *recordv1.Record) ([]byte, error) {
	return marshalOptions.MarshalAppend(b, r)
}
