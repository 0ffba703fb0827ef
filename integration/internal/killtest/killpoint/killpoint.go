// Package killpoint is what the kill tests' server binary and their rig
// ([killtest]) agree on: the points of a call at which the binary stops
// and waits to be killed, the lines it writes on its standard output, and
// the one-method gRPC service it serves.
//
// The binary writes [Listening] once it serves, and [At] when a call
// reaches the point it was told to stop at; then that call blocks for
// good, and the test kills the process with SIGKILL. No sleep decides
// when the kill happens: the line does.
//
// [killtest]: github.com/grpc-idempotency/idempotency/integration/internal/killtest
package killpoint

import (
	"fmt"
	"slices"
	"strings"
)

// Point is a place in a call at which the server binary can be killed.
type Point string

// The points that matter to what a retry finds after the kill.
const (
	// BeforeEffect is in the handler, under the claim, before the side
	// effect is recorded.
	BeforeEffect Point = "before-effect"
	// AfterEffect is in the handler, after the side effect is recorded and
	// before the handler returns, so before the outcome is stored.
	AfterEffect Point = "after-effect-before-complete"
	// AfterComplete is in an interceptor outside the idempotency
	// interceptor, after it has stored the outcome and before the answer
	// is sent.
	AfterComplete Point = "after-complete-before-answer"
)

// Points lists every point, in the order a call reaches them.
var Points = []Point{BeforeEffect, AfterEffect, AfterComplete}

// Valid reports whether p is one of [Points].
func (p Point) Valid() bool { return slices.Contains(Points, p) }

// Line prefixes of the binary's standard output.
const (
	listeningPrefix = "listening "
	atPrefix        = "at "
)

// Listening is the line the binary writes once it serves on addr.
func Listening(addr string) string { return listeningPrefix + addr }

// ParseListening returns the address of a [Listening] line.
func ParseListening(line string) (addr string, ok bool) {
	return strings.CutPrefix(line, listeningPrefix)
}

// Stop is what an [At] line says: the point reached, the call's key, and
// the last decision the idempotency server reported for that key (for
// example "executed" at [AfterComplete]: the outcome was stored), or "-"
// when there was none yet.
type Stop struct {
	Point    Point
	Key      string
	Decision string
}

// At is the line the binary writes when a call reaches the point it
// stops at. Keys hold no spaces ([ParseAt] splits on them).
func At(s Stop) string {
	d := s.Decision
	if d == "" {
		d = "-"
	}
	return fmt.Sprintf("%s%s %s %s", atPrefix, s.Point, s.Key, d)
}

// ParseAt reads an [At] line.
func ParseAt(line string) (Stop, bool) {
	rest, ok := strings.CutPrefix(line, atPrefix)
	if !ok {
		return Stop{}, false
	}
	f := strings.Fields(rest)
	if len(f) != 3 {
		return Stop{}, false
	}
	return Stop{Point: Point(f[0]), Key: f[1], Decision: f[2]}, true
}

// EffectsList is the Redis list to which the binary pushes, under -effect
// redis, the process ID of each execution of key.
func EffectsList(key string) string { return "killtest:effects:" + key }

// EffectsTable is the statement that creates the PostgreSQL table of
// name, to which the binary adds, under -effect postgres, a row of the
// key and the process ID of each execution.
func EffectsTable(name string) string {
	return "CREATE TABLE " + name + " (key text NOT NULL, pid text NOT NULL)"
}
