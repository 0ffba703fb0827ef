package httpidempotency_test

import (
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line, want string
	}{
		{"bare token", "order-1", "order-1"},
		{"structured field string", `"order-1"`, "order-1"},
		{"escaped quote and backslash", `"a\"b\\c"`, `a"b\c`},
		{"empty string", `""`, ""},
		{"space inside quotes", `"a b"`, "a b"},
		{"no closing quote", `"order-1`, `"order-1`},
		{"parameters after the string", `"order-1";v=1`, `"order-1";v=1`},
		{"bad escape", `"a\nb"`, `"a\nb"`},
		{"escape at the end", `"a\`, `"a\`},
		{"control byte", "\"a\x01b\"", "\"a\x01b\""},
		{"non-ASCII", `"café"`, `"café"`},
		{"quote inside a bare token", `or"der`, `or"der`},
		{"a lone quote", `"`, `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := httpidempotency.ParseKey(tt.line); got != tt.want {
				t.Fatalf("ParseKey(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}

// FuzzParseKey: header lines are untrusted. ParseKey never panics; a line it
// unquotes is exactly the quoting of what it returns.
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{"order-1", `"order-1"`, `"a\"b\\c"`, `""`, `"`, `"a\`, `"x";y`, "\"\xff\""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		got := httpidempotency.ParseKey(line)
		if got == line {
			return
		}
		if q := quote(got); q != line {
			t.Fatalf("ParseKey(%q) = %q, which quotes back to %q", line, got, q)
		}
	})
}

// quote writes s as a Structured Field string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(s) {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
