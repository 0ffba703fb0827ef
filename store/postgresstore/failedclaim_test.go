package postgresstore_test

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestClaimReplyLost: a claim whose statement committed but whose answer
// was lost (the connection cut on the way back) fails, and releases the
// claim it made, so the key is free at once instead of blocked for the
// whole lease by a claim nobody owns.
func TestClaimReplyLost(t *testing.T) {
	t.Parallel()
	direct, pool := newStore(t, 2)
	proxied, p := proxiedStore(t, direct)

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

// proxiedStore returns a store on the table of direct whose one
// connection goes through a fault proxy, with the claim statement already
// prepared on it (so that the next reply is a claim's answer, not its
// preparation), and the proxy.
func proxiedStore(t *testing.T, direct *postgresstore.Store) (*postgresstore.Store, *faultproxy.Proxy) {
	t.Helper()
	cfg, p := proxiedConfig(t, 1) // one connection: the warm-up prepares the claim on it
	proxied := postgresstore.New(pgtest.PoolFrom(t, cfg), postgresstore.WithTable(tableOf(t, direct)), postgresstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = proxied.Close() })
	if _, err := proxied.Claim(t.Context(), "warm-up", []byte("fp"), time.Hour, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	return proxied, p
}

// proxiedConfig returns the configuration of a pool of maxConns
// connections that reach PostgreSQL through a fault proxy, and the proxy,
// closed when t ends.
func proxiedConfig(t *testing.T, maxConns int32) (*pgxpool.Config, *faultproxy.Proxy) {
	t.Helper()
	cfg := pgtest.Config(t, maxConns)
	p, err := faultproxy.New(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	_, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.ParseUint(port, 10, 16)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(n)
	return cfg, p
}

// TestTakeOverReplyLost: a take-over of an abandoned entry whose statement
// committed but whose answer was lost fails, and abandons the claim it
// made rather than releasing it: the entry stays abandoned (its first
// handler may have run), one attempt further, instead of a free key whose
// next claim would know nothing of it.
func TestTakeOverReplyLost(t *testing.T) {
	t.Parallel()
	direct, _ := newStore(t, 2)
	proxied, p := proxiedStore(t, direct)
	ctx, fp := t.Context(), []byte("fp")
	c, err := direct.Claim(ctx, "k", fp, time.Hour, store.ClaimOptions{Keep: time.Hour})
	if err != nil || !c.Won() {
		t.Fatalf("kept claim: %+v, %v", c, err)
	}
	if err := direct.Abandon(ctx, "k", c.Token); err != nil {
		t.Fatal(err)
	}

	p.CutNextReply(1)
	if _, err := proxied.Claim(ctx, "k", fp, time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true}); err == nil {
		t.Fatal("take-over Claim succeeded though its answer was lost")
	}
	if p.Cuts() != 1 {
		t.Fatalf("%d cuts, want the claim's answer cut", p.Cuts())
	}
	info, err := direct.Lookup(ctx, "k")
	if err != nil || info.State != store.StateAbandoned || info.Attempt != 2 {
		t.Fatalf("entry after the failed take-over: %+v, %v, want it abandoned, as attempt 2", info, err)
	}
}

// TestTakeOverOfAFreeKeyReplyLost: a claim that may take over (TakeOver)
// but found the key free made a fresh entry, attempt 1, nobody's handler
// behind it; when its answer is lost, it is released as any failed claim
// is, and the key is free at once. It used to be abandoned, as a real
// take-over is: the next claim then took over an attempt that never ran
// (attempt 2), which postgresstore's TestLinearizability reported.
func TestTakeOverOfAFreeKeyReplyLost(t *testing.T) {
	t.Parallel()
	direct, _ := newStore(t, 2)
	proxied, p := proxiedStore(t, direct)
	ctx, fp := t.Context(), []byte("fp")

	p.CutNextReply(1)
	if _, err := proxied.Claim(ctx, "k", fp, time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true}); err == nil {
		t.Fatal("Claim succeeded though its answer was lost")
	}
	if p.Cuts() != 1 {
		t.Fatalf("%d cuts, want the claim's answer cut", p.Cuts())
	}
	if info, err := direct.Lookup(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("entry after the failed claim: %+v, %v, want none", info, err)
	}
}
