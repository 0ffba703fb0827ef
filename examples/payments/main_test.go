package main

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// The story's lines that carry its outcomes; run itself also checks them
// and fails, these make a wrong story visible in the test too.
var storyMarks = []string{
	"last answer replayed from the store: true",
	"the ledger holds 1 charge(s) for alice, 19.99 paid",
	"the ledger holds 1 charge(s) for bob, 5.00 paid",
	"refused: FailedPrecondition, reason IDEMPOTENCY_KEY_REUSED",
	"refused: InvalidArgument, reason IDEMPOTENCY_KEY_MISSING",
	"ch_1: alice charged 19.99, refunded 0.00",
	`idempotency_decisions_total{method="/payments.v1.Payments/Charge",outcome="executed"} 2`,
	`idempotency_decisions_total{method="/payments.v1.Payments/Charge",outcome="replayed"} 10`,
	"All outcomes as promised.",
}

func TestRunTellsTheStory(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cfg := config{Logs: t.Output(), LogLevel: slog.LevelDebug}
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantMarks(t, out.String(), "memory store")
}

// The -redis mode runs the same story on a real redis-server, and the
// records really land in Redis.
func TestRunTellsTheStoryOnRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	var out bytes.Buffer
	cfg := config{RedisAddr: srv.Addr(), Logs: t.Output(), LogLevel: slog.LevelDebug}
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantMarks(t, out.String(), "Redis store at "+srv.Addr())
	// Two charges completed; the refused and in-flight calls left nothing.
	if n, err := srv.Client().DBSize(t.Context()).Result(); err != nil || n != 2 {
		t.Fatalf("Redis holds %d keys (err %v), want the 2 completed charges", n, err)
	}
	// A second run on the same Redis uses fresh keys and tells the same story.
	out.Reset()
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
}

func TestRunFailsWithoutRedis(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now
	var out bytes.Buffer
	err = run(t.Context(), config{RedisAddr: addr}, &out)
	if err == nil || !strings.Contains(err.Error(), "redis at "+addr) {
		t.Fatalf("run = %v, want an error naming the Redis address", err)
	}
}

func wantMarks(t *testing.T, out, storeName string) {
	t.Helper()
	for _, mark := range append([]string{storeName}, storyMarks...) {
		if !strings.Contains(out, mark) {
			t.Errorf("output lacks %q", mark)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
