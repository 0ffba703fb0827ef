package idempotency

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Wire names.
const (
	// MetadataKey is the request metadata key that carries the client's
	// idempotency key.
	MetadataKey = "idempotency-key"
	// ReplayedKey is set to "true" on a replayed answer: in the response
	// header of a replayed success, in the trailer of a replayed error.
	// Only a replay sets it: the server interceptor strips it, under any
	// letter case, from the header and trailer of every handler it calls.
	// Clients read it with [Replayed] or [ReplayedInto].
	ReplayedKey = "idempotency-replayed"
	// ResumeAfterKey is the request metadata key with which a retry of a
	// keyed server-streaming call asks for the messages after the first N
	// of its answer (a non-negative decimal integer), those the caller
	// already has. See [Server.StreamServerInterceptor].
	ResumeAfterKey = "idempotency-resume-after"
	// MaxKeyLen is the longest key accepted, in bytes.
	MaxKeyLen = 255
)

// ValidateKey reports whether key is acceptable: 1 to [MaxKeyLen] bytes of
// printable ASCII (0x21 to 0x7E). The error is a [*KeyError] and never
// echoes the key.
func ValidateKey(key string) error {
	if key == "" {
		return &KeyError{Err: ErrKeyInvalid, Detail: "key is empty"}
	}
	if len(key) > MaxKeyLen {
		return &KeyError{Err: ErrKeyInvalid, Detail: "key is longer than " + strconv.Itoa(MaxKeyLen) + " bytes"}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return &KeyError{Err: ErrKeyInvalid, Detail: "key has a byte outside printable ASCII at offset " + strconv.Itoa(i)}
		}
	}
	return nil
}

// clientKey returns the key of the call: from metadata, else from the
// method's key field. It returns "" with no error when there is none, and
// the method's configuration error, failing the call closed, when its
// policy cannot work.
func (e *engine) clientKey(ctx context.Context, m *methodConfig, req proto.Message) (string, error) {
	if m.err != nil {
		return "", m.err
	}
	vals := metadata.ValueFromIncomingContext(ctx, e.cfg.metadataKey)
	switch {
	case len(vals) > 1:
		return "", &KeyError{Err: ErrKeyInvalid, Detail: "more than one key in metadata " + strconv.Quote(e.cfg.metadataKey)}
	case len(vals) == 1:
		return vals[0], ValidateKey(vals[0])
	case m.keyField != nil && req != nil: // nil: a client stream without messages
		k := req.ProtoReflect().Get(m.keyField).String()
		if k == "" {
			return "", nil
		}
		return k, ValidateKey(k)
	}
	return "", nil
}
