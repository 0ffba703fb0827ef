package mdkey

import "testing"

func TestCheck(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"idempotency-key": "idempotency-key",
		"X_Request.Key-2": "x_request.key-2",
		"binary":          "binary",
		"my-grpc-key":     "my-grpc-key",
	} {
		if got, err := Check(name); err != nil || got != want {
			t.Errorf("Check(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"", " ", "Idempotency Key!", "clé", "key:1", "key/1", "key-bin", "KEY-BIN", "grpc-key", "Grpc-Key"} {
		if got, err := Check(name); err == nil {
			t.Errorf("Check(%q) = %q, nil; want an error", name, got)
		}
	}
}
