package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serve runs only the server on lis, with server reflection, until ctx is
// done. Callers without a token are let in as [anonymous] so that plain
// grpcurl commands work; the demo tokens map to tenants as in the story.
// With metrics set, it serves the counters there on /metrics.
func serve(ctx context.Context, cfg config, lis, metrics net.Listener, out io.Writer) error {
	b, err := openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.close()
	logger := newLogger(cfg)
	m := newMeter()
	srv, _ := newServer(serverConfig{
		store:    b.store,
		payments: b.payments(0),
		logger:   logger,
		meter:    m,
		auth:     authenticator{tokens: demoTokens, allowAnonymous: true},
	})
	if metrics != nil {
		defer serveMetrics(metrics, m, logger)()
		fmt.Fprintf(out, "Prometheus metrics on http://%s/metrics\n", metrics.Addr())
	}
	fmt.Fprintf(out, "payments.v1.Payments on %s (%s), server reflection on. Try:\n", lis.Addr(), b.name)
	fmt.Fprintf(out, "  grpcurl -plaintext -v -H 'idempotency-key: k1' -d '{\"customer\":\"alice\",\"amount_cents\":1999}' %s payments.v1.Payments/Charge\n", lis.Addr())
	fmt.Fprintln(out, "twice: the second answer is the first one replayed (header idempotency-replayed: true). Ctrl-C stops.")

	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	return srv.Serve(lis)
}

// serveMetrics serves m in the Prometheus text format on lis, path
// /metrics, until the returned function is called.
func serveMetrics(lis net.Listener, m *meter, logger *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { m.writePrometheus(w) })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics", slog.Any("err", err))
		}
	}()
	return func() { _ = hs.Close() }
}
