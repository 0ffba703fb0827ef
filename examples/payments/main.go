// Command payments is the runnable example of the idempotency library: a
// small payments service whose ledger would charge twice on every retry,
// made safe by the server and client interceptors.
//
// With no flags it starts the server and a client in this process, on the
// in-memory store, and tells the story of five calls: a lost response that
// is retried and replayed, ten concurrent duplicates, a reused key, a
// missing key and a read. It exits with status 1 if any outcome is not the
// one the library promises, so it doubles as a smoke test.
//
// Usage:
//
//	go run ./examples/payments                    # the story, memory store
//	go run ./examples/payments -redis localhost:6379   # the story on Redis
//	go run ./examples/payments -postgres postgres://postgres@localhost/postgres   # ledger and store in PostgreSQL
//	go run ./examples/payments -mysql 'root@tcp(127.0.0.1:3306)/'                 # ledger and store in MySQL or MariaDB
//	go run ./examples/payments -sqlite /tmp/payments.db                           # ledger and store in one SQLite file
//	go run ./examples/payments -listen :50051     # only the server, for grpcurl
//	go run ./examples/payments -http :8080        # the server behind a REST gateway, for curl
//	go run ./examples/payments -otel              # the story, then its spans and metrics
//	go run ./examples/payments -listen :50051 -prometheus :9464   # OTel metrics for Prometheus
//	go run ./examples/payments -v                 # with every decision logged
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	redisAddr := flag.String("redis", "", "use the Redis store at `host:port` instead of the in-memory store")
	postgresURL := flag.String("postgres", "", "keep the ledger and the store in PostgreSQL at `URL`, each charge completed in its ledger transaction")
	mysqlDSN := flag.String("mysql", "", "keep the ledger and the store in MySQL or MariaDB at `DSN` (go-sql-driver/mysql), each charge completed in its ledger transaction")
	sqlitePath := flag.String("sqlite", "", "keep the ledger and the store in the SQLite file at `PATH` (created when missing), each charge completed in its ledger transaction")
	listen := flag.String("listen", "", "run only the server on `address` (for example :50051), with server reflection, until interrupted")
	metricsAddr := flag.String("metrics", "", "with -listen or -http, serve Prometheus metrics on http://`address`/metrics")
	httpAddr := flag.String("http", "", "run only the server, behind a grpc-gateway REST gateway on `address` (for example :8080), until interrupted")
	promAddr := flag.String("prometheus", "", "with -listen or -http, serve the OpenTelemetry metrics (OTel Prometheus exporter) on http://`address`/metrics, instead of printing them")
	otel := flag.Bool("otel", false, "trace and meter every call with OpenTelemetry and print the spans and metrics (SDK stdout exporters)")
	latency := flag.Duration("latency", 0, "with -listen or -http, make each Charge take this `long`, to see a duplicate refused while it runs")
	replayCache := flag.Int("replay-cache", 10_000, "with -listen or -http, keep up to `N` completed outcomes (64 MiB, 5 minutes each at most) in the server's replay cache, so that a replay of one makes no store call; 0 turns it off")
	verbose := flag.Bool("v", false, "log every idempotency decision and every call to stderr (slog)")
	flag.Parse()

	cfg := config{RedisAddr: *redisAddr, PostgresURL: *postgresURL, MySQLDSN: *mysqlDSN, SQLitePath: *sqlitePath, Logs: os.Stderr, LogLevel: slog.LevelWarn, OTel: *otel, Latency: *latency, ReplayCache: *replayCache}
	if *verbose {
		cfg.LogLevel = slog.LevelInfo
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	if *listen != "" || *httpAddr != "" {
		cfg.LogLevel = slog.LevelInfo
		err = listenAndServe(ctx, cfg, *listen, *httpAddr, sideAddrs{metrics: *metricsAddr, prometheus: *promAddr})
	} else {
		err = run(ctx, cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		stop()
		os.Exit(1)
	}
}

// sideAddrs are the addresses of -metrics and -prometheus; empty for none.
type sideAddrs struct{ metrics, prometheus string }

// listenAndServe opens the listeners of -listen, -http, -metrics and
// -prometheus and serves. With -http alone, the gRPC server listens on a
// loopback port.
func listenAndServe(ctx context.Context, cfg config, addr, httpAddr string, side sideAddrs) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis listeners
	defer func() { // when serving ends or cannot start; a second Close is harmless
		for _, l := range []net.Listener{lis.grpc, lis.metrics, lis.http, lis.prometheus} {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	var err error
	if lis.grpc, err = net.Listen("tcp", addr); err != nil {
		return err
	}
	if side.metrics != "" {
		if lis.metrics, err = net.Listen("tcp", side.metrics); err != nil {
			return err
		}
	}
	if side.prometheus != "" {
		if lis.prometheus, err = net.Listen("tcp", side.prometheus); err != nil {
			return err
		}
	}
	if httpAddr != "" {
		if lis.http, err = net.Listen("tcp", httpAddr); err != nil {
			return err
		}
	}
	return serve(ctx, cfg, lis, os.Stdout)
}
