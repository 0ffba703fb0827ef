package httpidempotency

import (
	"net/http"
	"strings"
)

// ParseKey returns the key that one Idempotency-Key header line carries. A
// line that is a Structured Field string (RFC 8941 section 3.3.3), as the
// IETF draft sends it, "abc" in double quotes with \" and \\ escapes,
// carries what is between the quotes; any other line, such as the bare
// token abc that clients such as Stripe's send, is the key as it stands.
// ParseKey does not validate the key: pass what it returns to
// [idempotency.ValidateKey], which refuses an empty key, a key longer than
// [idempotency.MaxKeyLen] bytes and bytes outside printable ASCII.
func ParseKey(line string) string {
	if s, ok := unquote(line); ok {
		return s
	}
	return line
}

// keyLine returns the header line that carries key, a key that
// [idempotency.ValidateKey] accepts: the key as a bare token, or, for a
// key that [ParseKey] would read as a Structured Field string ("abc" in
// double quotes), the key as one, so that the server reads the key
// itself and not what is between its quotes.
func keyLine(key string) string {
	if ParseKey(key) == key {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 4)
	b.WriteByte('"')
	for i := range len(key) {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// unquote parses a whole line as a Structured Field string: a double quote,
// printable ASCII (0x20-0x7E) with " and \ escaped by \, a double quote, and
// nothing after it.
func unquote(line string) (string, bool) {
	if len(line) < 2 || line[0] != '"' {
		return "", false
	}
	buf := make([]byte, 0, len(line)-2)
	for i := 1; i < len(line); i++ {
		switch b := line[i]; {
		case b == '"':
			return string(buf), i == len(line)-1
		case b == '\\':
			i++
			if i == len(line) || (line[i] != '"' && line[i] != '\\') {
				return "", false
			}
			buf = append(buf, line[i])
		case b < 0x20 || b > 0x7e:
			return "", false
		default:
			buf = append(buf, b)
		}
	}
	return "", false // no closing quote
}

// keyLines returns the lines of the header name (canonical) in h, under
// every spelling of the name: http.Header is a map, and a caller may set
// h["idempotency-key"], which Header.Values does not find and net/http
// sends as written. exact reports whether h has no other spelling of name.
func keyLines(h http.Header, name string) (lines []string, exact bool) {
	lines, exact = h[name], true
	for k, vs := range h {
		if k != name && len(k) == len(name) && strings.EqualFold(k, name) {
			lines, exact = append(lines[:len(lines):len(lines)], vs...), false
		}
	}
	return lines, exact
}
