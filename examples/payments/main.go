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
//	go run ./examples/payments -listen :50051     # only the server, for grpcurl
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
	listen := flag.String("listen", "", "run only the server on `address` (for example :50051), with server reflection, until interrupted")
	metricsAddr := flag.String("metrics", "", "with -listen, serve Prometheus metrics on http://`address`/metrics")
	verbose := flag.Bool("v", false, "log every idempotency decision and every call to stderr (slog)")
	flag.Parse()

	cfg := config{RedisAddr: *redisAddr, PostgresURL: *postgresURL, Logs: os.Stderr, LogLevel: slog.LevelWarn}
	if *verbose {
		cfg.LogLevel = slog.LevelInfo
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	if *listen != "" {
		cfg.LogLevel = slog.LevelInfo
		err = listenAndServe(ctx, cfg, *listen, *metricsAddr)
	} else {
		err = run(ctx, cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		stop()
		os.Exit(1)
	}
}

// listenAndServe opens the listeners of -listen and -metrics and serves.
func listenAndServe(ctx context.Context, cfg config, addr, metricsAddr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var metrics net.Listener
	if metricsAddr != "" {
		if metrics, err = net.Listen("tcp", metricsAddr); err != nil {
			_ = lis.Close()
			return err
		}
	}
	return serve(ctx, cfg, lis, metrics, os.Stdout)
}
