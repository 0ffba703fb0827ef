package httpidempotency

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
