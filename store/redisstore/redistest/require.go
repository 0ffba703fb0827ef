package redistest

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a test failure instead of a skip. CI sets it to "1".
const RequireEnv = "IDEMPOTENCY_REQUIRE_REDIS"

// Require returns the paths of redis-server and redis-cli. When either is
// not on PATH it skips the test with a hint on how to install them, or fails
// it when [RequireEnv] is "1". Every helper in this package calls it first.
func Require(tb testing.TB) (server, cli string) {
	tb.Helper()
	server, err := exec.LookPath("redis-server")
	if err == nil {
		cli, err = exec.LookPath("redis-cli")
	}
	if err == nil {
		return server, cli
	}
	const msg = "redistest: redis-server and redis-cli are needed for this test " +
		"(install them with: apt-get install redis-server redis-tools): %v"
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf(msg+" (%s=1, so this fails instead of skipping)", err, RequireEnv)
		return "", ""
	}
	tb.Skipf(msg, err)
	return "", ""
}
