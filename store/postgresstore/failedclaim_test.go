package postgresstore_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/pgtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// TestClaimReplyLost: a claim whose statement committed but whose answer
// was lost (the connection cut on the way back) fails, and releases the
// claim it made, so the key is free at once instead of blocked for the
// whole lease by a claim nobody owns.
func TestClaimReplyLost(t *testing.T) {
	t.Parallel()
	direct, pool := newStore(t, 2)
	cfg := pgtest.Config(t, 1) // one connection: the warm-up prepares the claim on it
	p, err := faultproxy.New(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	_, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.ParseUint(port, 10, 16)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(n)
	proxied := postgresstore.New(pgtest.PoolFrom(t, cfg), postgresstore.WithTable(tableOf(t, direct)), postgresstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = proxied.Close() })
	// Prepare the claim statement on the proxied connection, so that the
	// next reply is the claim's answer, not its preparation.
	if _, err := proxied.Claim(t.Context(), "warm-up", []byte("fp"), time.Hour, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}

	p.CutNextReply(1)
	if _, err := proxied.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{}); err == nil {
		t.Fatal("Claim succeeded though its answer was lost")
	}
	if p.Cuts() != 1 {
		t.Fatalf("%d cuts, want the claim's answer cut", p.Cuts())
	}
	var rows int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+tableOf(t, direct)+" WHERE key = 'k'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	c, err := direct.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("key after the failed claim: won=%v err=%v (%d rows), want it free", c.Won(), err, rows)
	}
}
