package redistest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...) }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...) }

func TestRequireWithoutRedis(t *testing.T) {
	// t.Setenv forbids t.Parallel.
	t.Setenv("PATH", t.TempDir())
	for _, tc := range []struct {
		name, env    string
		skip, failed bool
	}{
		{name: "skips", env: "", skip: true},
		{name: "skips when not 1", env: "0", skip: true},
		{name: "fails when required", env: "1", failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(redistest.RequireEnv, tc.env)
			r := &recorder{TB: t}
			redistest.Require(r)
			if (r.skipped != "") != tc.skip || (r.failed != "") != tc.failed {
				t.Fatalf("skipped %q, failed %q; want skip=%v fail=%v", r.skipped, r.failed, tc.skip, tc.failed)
			}
			msg := r.skipped + r.failed
			if !strings.Contains(msg, "apt-get install redis-server redis-tools") {
				t.Errorf("message %q does not say how to install Redis", msg)
			}
		})
	}
}

func TestRequireWithRedis(t *testing.T) {
	t.Parallel()
	server, cli := redistest.Require(t)
	if server == "" || cli == "" {
		t.Fatalf("Require = %q, %q", server, cli)
	}
}
