package store_test

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// TestNewToken checks the documented shape of a token (25 characters,
// '1' and base64url), that it carries the time it was made, and that
// tokens made in the same millisecond differ.
func TestNewToken(t *testing.T) {
	t.Parallel()
	before := time.Now().Truncate(time.Millisecond)
	seen := map[string]bool{}
	for range 1000 {
		tok := store.NewToken()
		if len(tok) != 25 || tok[0] != '1' {
			t.Fatalf("token %q: want 25 characters starting with '1'", tok)
		}
		if _, err := base64.RawURLEncoding.Strict().DecodeString(tok[1:]); err != nil {
			t.Fatalf("token %q is not '1' and base64url: %v", tok, err)
		}
		if seen[tok] {
			t.Fatalf("token %q made twice", tok)
		}
		seen[tok] = true
		at, ok := store.TokenTime(tok)
		if after := time.Now(); !ok || at.Before(before) || at.After(after) {
			t.Fatalf("TokenTime(%q) = %v, %v; want a time from %v to %v", tok, at, ok, before, after)
		}
	}
}

// TestTokenTimeUnknown: tokens not made by NewToken have no claim time,
// among them the random tokens of earlier releases and the memory store's.
func TestTokenTimeUnknown(t *testing.T) {
	t.Parallel()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	good := store.NewToken()
	for _, tok := range []string{
		"",
		base64.RawURLEncoding.EncodeToString(b), // earlier releases: 22 characters
		"1b", "7ks",                             // memorystore
		"2" + good[1:], // another version
		good[:24],
		good + "A",
		"1" + strings.Repeat("!", 24),
		"1" + strings.Repeat("A", 23) + "=",
	} {
		if at, ok := store.TokenTime(tok); ok {
			t.Errorf("TokenTime(%q) = %v, true; want false", tok, at)
		}
	}
}

// FuzzTokenTime: TokenTime never panics, accepts only 25-character tokens
// starting with '1', and what it accepts reads back the same from the
// bytes it decoded.
func FuzzTokenTime(f *testing.F) {
	f.Add(store.NewToken())
	f.Add("")
	f.Add("1AAAAAAAAAAAAAAAAAAAAAAAA")
	f.Add("1________________________")
	f.Fuzz(func(t *testing.T, tok string) {
		at, ok := store.TokenTime(tok)
		if !ok {
			if !at.IsZero() {
				t.Fatalf("TokenTime(%q) = %v, false: want the zero Time", tok, at)
			}
			return
		}
		if len(tok) != 25 || tok[0] != '1' {
			t.Fatalf("TokenTime(%q) accepted a token of another shape", tok)
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(tok[1:])
		if err != nil {
			t.Fatalf("TokenTime(%q) accepted text that is not base64url: %v", tok, err)
		}
		var ms int64
		for _, c := range b[:6] {
			ms = ms<<8 | int64(c)
		}
		if at.UnixMilli() != ms {
			t.Fatalf("TokenTime(%q) = %v, want %d ms", tok, at, ms)
		}
	})
}
