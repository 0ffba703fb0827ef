package redistest_test

import (
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

func TestFillMemory(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	ctx := t.Context()
	n := srv.FillMemory(ctx, "fill:")
	if n == 0 {
		t.Fatal("FillMemory wrote nothing before OOM")
	}
	if err := rdb.Set(ctx, "after-fill", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM ") {
		t.Fatalf("SET after FillMemory = %v, want an OOM error", err)
	}
	srv.FreeMemory(ctx, "fill:", n)
	if err := rdb.Set(ctx, "after-free", "x", 0).Err(); err != nil {
		t.Fatalf("SET after FreeMemory: %v", err)
	}
	if got := rdb.DBSize(ctx).Val(); got != 1 {
		t.Fatalf("DBSIZE after FreeMemory and one SET = %d, want 1: filler keys left", got)
	}
}
