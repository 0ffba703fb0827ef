package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"":                                     false,
		"a":                                    true,
		"550e8400-e29b-41d4-a716-446655440000": true,
		"!~":                                   true,
		"a b":                                  false,
		"a\x00":                                false,
		"a\n":                                  false,
		"\x7f":                                 false,
		"ключ":                                 false,
		strings.Repeat("x", 255):               true,
		strings.Repeat("x", 256):               false,
	}
	for key, ok := range cases {
		err := idempotency.ValidateKey(key)
		if (err == nil) != ok {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v", key, err, ok)
		}
		if err != nil && !errors.Is(err, idempotency.ErrKeyInvalid) {
			t.Errorf("ValidateKey(%q) = %v, want ErrKeyInvalid", key, err)
		}
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range []string{"", "a", "k-1", "a b", "\x00", "\xff\xfe", strings.Repeat("z", 256), "é", "\x7f", "~!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := idempotency.ValidateKey(key)
		want := len(key) >= 1 && len(key) <= idempotency.MaxKeyLen
		for i := range len(key) {
			if key[i] < 0x21 || key[i] > 0x7e {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidateKey(%q) = %v, want ok=%v", key, err, want)
		}
		if err != nil && !errors.Is(err, idempotency.ErrKeyInvalid) {
			t.Fatalf("ValidateKey(%q) = %v, want ErrKeyInvalid", key, err)
		}
	})
}
