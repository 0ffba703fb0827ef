package gatewayidempotency

import (
	"errors"
	"fmt"
	"strings"
)

// checkMetadataKey returns name lower-cased, as gRPC carries metadata
// names, or an error saying why gRPC cannot carry the key under it as it
// stands: an empty name, a character other than a-z, 0-9, '-', '_' and
// '.', a "-bin" suffix (gRPC would carry the value as binary,
// base64-encoded) or a "grpc-" prefix (reserved for gRPC itself).
//
// It is this module's copy of the check behind
// [idempotency.WithMetadataKey], so that the module uses only the core's
// public API; TestMetadataKeyAgreesWithServer keeps the two in step.
func checkMetadataKey(name string) (string, error) {
	n := strings.ToLower(name)
	switch {
	case n == "":
		return "", errors.New("metadata key must not be empty")
	case strings.HasSuffix(n, "-bin"):
		return "", fmt.Errorf("metadata key %q ends in -bin: gRPC would carry the key as binary", name)
	case strings.HasPrefix(n, "grpc-"):
		return "", fmt.Errorf("metadata key %q starts with grpc-, which gRPC reserves", name)
	}
	for _, r := range n {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "", fmt.Errorf("metadata key %q has %q; a gRPC metadata name has only a-z, 0-9, '-', '_' and '.'", name, r)
		}
	}
	return n, nil
}
