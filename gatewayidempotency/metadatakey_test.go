package gatewayidempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// panics reports whether f panics.
func panics(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// serverRefuses reports whether idempotency.NewServer refuses
// WithMetadataKey(name).
func serverRefuses(t *testing.T, name string) bool {
	s := memorystore.New(memorystore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.Close() })
	return panics(func() { idempotency.NewServer(s, idempotency.WithMetadataKey(name)) })
}

// gatewayRefuses reports whether ServeMuxOptions refuses
// WithMetadataKey(name).
func gatewayRefuses(name string) bool {
	return panics(func() { gatewayidempotency.ServeMuxOptions(gatewayidempotency.WithMetadataKey(name)) })
}

// The module checks metadata keys with a copy of the server's check (it
// uses only the core module's public API): both refuse the same names.
func TestMetadataKeyAgreesWithServer(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"idempotency-key", "X_Request.Key-2", "binary", "my-grpc-key",
		"", " ", "Idempotency Key!", "clé", "key:1", "key/1", "key-bin", "KEY-BIN", "grpc-key", "Grpc-Key",
	} {
		if s, g := serverRefuses(t, name), gatewayRefuses(name); s != g {
			t.Errorf("WithMetadataKey(%q): server refuses %v, gateway refuses %v", name, s, g)
		}
	}
}

func FuzzMetadataKeyAgreesWithServer(f *testing.F) {
	for _, name := range []string{"idempotency-key", "", "a-bin", "grpc-a", "A.B_C", "ß"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if s, g := serverRefuses(t, name), gatewayRefuses(name); s != g {
			t.Fatalf("WithMetadataKey(%q): server refuses %v, gateway refuses %v", name, s, g)
		}
	})
}
