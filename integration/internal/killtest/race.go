//go:build race

package killtest

// race is set when the tests run under the race detector: the binary is
// built with it too.
const race = true
