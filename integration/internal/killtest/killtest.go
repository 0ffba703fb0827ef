// Package killtest is the rig of the kill tests: it builds the server
// binary (killserver), runs it as real OS processes, waits for the line a
// process writes when a call reaches its kill point ([killpoint]), kills
// the process there with SIGKILL (or stops it with SIGTERM, as a deploy
// does), and calls the binary's one method with a key through the
// idempotency client interceptor.
//
// What the tests check is outside every process: the side effects in a
// Redis list or a SQL table, and the keys in the store the processes
// share (a server, or a SQLite file).
// Nothing waits by sleeping; every wait is bounded by the caller's context
// and fails with what the process wrote on its standard error.
package killtest

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// serverPackage is the import path of the binary.
const serverPackage = "github.com/grpc-idempotency/idempotency/integration/internal/killtest/killserver"

// Build builds the server binary into dir, with the race detector when
// the tests run under it, and returns its path. It runs the go command
// that runs the tests (go test puts its own first on PATH) in the working
// directory of the test, in the integration module; ctx bounds the build.
func Build(ctx context.Context, tb testing.TB, dir string) string {
	tb.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("killtest: no go command to build the server: %v", err)
	}
	bin := filepath.Join(dir, "killserver")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	out, err := exec.CommandContext(ctx, goCmd, append(args, serverPackage)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("killtest: go %v: %v\n%s", args, err, out)
	}
	return bin
}
