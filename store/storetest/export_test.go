package storetest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// CheckLinearizability records and checks a history as RunLinearizability
// does, drawing an illegal one in dir, and returns whether the history
// was illegal (or a won claim's token was reused), the verdict, and the
// page drawn.
func CheckLinearizability(t *testing.T, cfg LinearizabilityConfig, dir string) (illegal bool, verdict, page string) {
	res := checkLinearizability(t, cfg, dir)
	if res.reusedToken != "" {
		return true, "a reused owner token", res.page
	}
	return res.result == porcupine.Illegal, res.verdict, res.page
}
