package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escape returns s as a terminal may show it: every character that could
// move the cursor, change the terminal's state, or reorder or hide text
// written in its place. A stored message, metadata, body or key is
// whatever a client or a handler put there, so text mode writes it
// through escape; --json writes the exact bytes.
//
// Escaped are the C0 controls and DEL (\n, \r and \t as such, the others
// as \x1b), the C1 controls (\u009b), the line and paragraph separators,
// the bidirectional marks, embeddings, overrides and isolates (\u202e),
// and each byte that is not valid UTF-8 (\xff). A backslash is left as it
// is: text mode is for reading, and JSON bodies keep their own escapes.
func escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case unsafeRune(r, n):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether r, n bytes of a string, is a character that
// escape escapes.
func unsafeRune(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1: // a byte that is not UTF-8
		return true
	case r < 0x20, r >= 0x7f && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // bidi marks
		return true
	case r >= 0x2028 && r <= 0x202e: // separators, embeddings, overrides
		return true
	case r >= 0x2066 && r <= 0x2069: // isolates
		return true
	}
	return false
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
