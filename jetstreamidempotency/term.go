package jetstreamidempotency

import (
	"strconv"
	"strings"
)

// termReasons reports whether a NATS server of version (as its INFO gives
// it: "2.10.4", "2.11.0-beta.1") terminates a message sent TermWithReason.
// Servers before 2.10.4 ignore it and redeliver the message every AckWait
// (nats.go's TermWithReason says so); an unknown version is taken for an
// old one, since a plain Term stops redelivery on every version, and so is
// a pre-release of 2.10.4 itself.
func termReasons(version string) bool {
	version, pre, _ := strings.Cut(version, "-")
	var v [3]int
	parts := strings.Split(version, ".")
	if len(parts) != 3 {
		return false
	}
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return false
		}
		v[i] = n
	}
	first := [3]int{2, 10, 4}
	for i := range v {
		if v[i] != first[i] {
			return v[i] > first[i]
		}
	}
	return pre == ""
}
