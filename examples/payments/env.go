package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// config is what [run] and [serve] are told by the flags.
type config struct {
	// RedisAddr selects the Redis store at host:port; empty means the
	// in-memory store.
	RedisAddr string
	// PostgresURL selects PostgreSQL for the ledger and the store
	// together, each Charge completed inside its ledger transaction.
	PostgresURL string
	// MySQLDSN selects MySQL (or MariaDB) for the ledger and the store
	// together, as PostgresURL does PostgreSQL: a go-sql-driver/mysql DSN.
	MySQLDSN string
	// SQLitePath selects a SQLite file for the ledger and the store
	// together, as PostgresURL does PostgreSQL: the file's path.
	SQLitePath string
	// Logs receives the slog output (every idempotency decision and every
	// call); nil discards it.
	Logs io.Writer
	// LogLevel is the lowest level written to Logs.
	LogLevel slog.Level
	// OTel traces and meters every call with OpenTelemetry and prints the
	// spans and metrics with the SDK's stdout exporters (-otel).
	OTel bool
	// Latency is how long each Charge takes in the server modes (-latency),
	// so that a duplicate sent meanwhile finds its key in flight.
	Latency time.Duration
	// ReplayCache is the most completed outcomes the server keeps in its
	// replay cache in the server modes (-replay-cache); 0: no cache.
	ReplayCache int
}

// Demo tenants and their bearer tokens.
const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
	tokenA  = "demo-token-a"
	tokenB  = "demo-token-b"
)

var demoTokens = map[string]string{tokenA: tenantA, tokenB: tenantB}

// chargeLatency is how long a Charge takes in the story; long enough for
// ten concurrent duplicates to overlap.
const chargeLatency = 50 * time.Millisecond

// openStore returns the store cfg asks for, its name for the story, and a
// function that closes it.
func openStore(ctx context.Context, cfg config) (store.Store, string, func(), error) {
	if cfg.RedisAddr == "" {
		s := memorystore.New()
		return s, "memory store", func() { _ = s.Close() }, nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
	s := redisstore.New(rdb)
	if err := s.LoadScripts(ctx); err != nil {
		_ = rdb.Close()
		return nil, "", nil, fmt.Errorf("redis at %s: %w", cfg.RedisAddr, err)
	}
	return s, "Redis store at " + cfg.RedisAddr, func() { _ = rdb.Close() }, nil
}

func newLogger(cfg config) *slog.Logger {
	if cfg.Logs == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(cfg.Logs, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// demo is a running server with the two clients of the story.
type demo struct {
	addr    string
	ledger  ledgerView
	backend *backend
	meter   *meter
	network *lossyNetwork
	// keyed uses the all-in-one client interceptor: a key per call, and
	// retries with that key.
	keyed paymentsv1.PaymentsClient
	// plain has no idempotency interceptor at all.
	plain paymentsv1.PaymentsClient
	close func()
}

// startDemo starts the server on a loopback port with the lossy network in
// its chain, and connects both clients as tenant A. tel, when set, traces
// and meters the server and both clients.
func startDemo(b *backend, logger *slog.Logger, tel *telemetry) (*demo, error) {
	d := &demo{ledger: b.ledger, backend: b, meter: newMeter(), network: &lossyNetwork{}}
	srv, _, _ := newServer(serverConfig{
		store:      b.store,
		payments:   b.payments(chargeLatency),
		logger:     logger,
		meter:      d.meter,
		auth:       authenticator{tokens: demoTokens},
		network:    d.network,
		retryAfter: 20 * time.Millisecond,
		telemetry:  tel,
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logger.Error("serve", slog.Any("err", err))
		}
	}()
	d.addr = lis.Addr().String()
	keyedConn, err := dial(d.addr, tokenA, d.meter, tel, idempotency.UnaryClientInterceptor(
		idempotency.WithOnRetry(func(_ context.Context, _ int, _ error) { d.meter.retried() }),
	))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	plainConn, err := dial(d.addr, tokenA, d.meter, tel)
	if err != nil {
		_ = keyedConn.Close()
		srv.Stop()
		return nil, err
	}
	d.keyed = paymentsv1.NewPaymentsClient(keyedConn)
	d.plain = paymentsv1.NewPaymentsClient(plainConn)
	d.close = func() {
		_ = keyedConn.Close()
		_ = plainConn.Close()
		srv.GracefulStop()
		<-done
	}
	return d, nil
}
