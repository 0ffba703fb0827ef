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

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	paymentsgw "github.com/grpc-idempotency/idempotency/examples/payments/gengateway/payments/v1"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// listeners are what the server modes serve on; metrics and http may be
// nil.
type listeners struct {
	grpc    net.Listener // the gRPC server (-listen, or a loopback port for -http alone)
	metrics net.Listener // Prometheus metrics (-metrics)
	http    net.Listener // the grpc-gateway REST gateway (-http)
	// prometheus serves the OpenTelemetry metrics for Prometheus
	// (-prometheus).
	prometheus net.Listener
}

// serve runs only the server on lis.grpc, with server reflection, until
// ctx is done. Callers without a token are let in as [anonymous] so that
// plain grpcurl and curl commands work; the demo tokens map to tenants as
// in the story. With lis.metrics, it serves the counters there on
// /metrics; with lis.http, the REST gateway; with cfg.OTel, it prints spans
// as they end and the metrics every [metricInterval] to out; with
// lis.prometheus, it serves the OpenTelemetry metrics there on /metrics
// instead of printing them (and prints no spans). With cfg.ReplayCache,
// the server keeps that many outcomes in its replay cache, and the
// OpenTelemetry metrics (either way) report its fill.
func serve(ctx context.Context, cfg config, lis listeners, out io.Writer) error {
	b, err := openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.close()
	logger := newLogger(cfg)
	var tel *telemetry
	switch {
	case lis.prometheus != nil:
		var reg *prometheus.Registry
		if tel, reg, err = newPrometheusTelemetry(); err != nil {
			return err
		}
		stop, err := servePrometheus(lis.prometheus, tel, reg, b.store, logger)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(out, "OpenTelemetry metrics for Prometheus on http://%s/metrics\n", lis.prometheus.Addr())
	case cfg.OTel:
		if tel, err = newTelemetry(out, out, metricInterval); err != nil {
			return err
		}
	}
	if tel != nil {
		defer func() { _ = tel.shutdown(context.WithoutCancel(ctx)) }()
	}
	m := newMeter()
	srv, _, idem := newServer(serverConfig{
		store:       b.store,
		payments:    b.payments(cfg.Latency),
		logger:      logger,
		meter:       m,
		auth:        authenticator{tokens: demoTokens, allowAnonymous: true},
		telemetry:   tel,
		replayCache: cfg.ReplayCache,
	})
	// After the gRPC server has stopped, before the store is closed: it
	// ends the cache's subscription to the store's purges.
	defer func() { _ = idem.Close() }()
	if tel != nil {
		reg, err := otelidempotency.RegisterReplayCacheMetrics(idem, otelidempotency.WithMeterProvider(tel.mp))
		if err != nil {
			return err
		}
		defer func() { _ = reg.Unregister() }()
	}
	if lis.metrics != nil {
		defer serveMetrics(lis.metrics, m, logger)()
		fmt.Fprintf(out, "Prometheus metrics on http://%s/metrics\n", lis.metrics.Addr())
	}
	if lis.http != nil {
		stop, err := serveGateway(lis, tel, logger)
		if err != nil {
			return err
		}
		defer stop()
		printCurl(out, lis.http.Addr())
	}
	fmt.Fprintf(out, "payments.v1.Payments on %s (%s), server reflection on. Try:\n", lis.grpc.Addr(), b.name)
	fmt.Fprintf(out, "  grpcurl -plaintext -v -H 'idempotency-key: k1' -d '{\"customer\":\"alice\",\"amount_cents\":1999}' %s payments.v1.Payments/Charge\n", lis.grpc.Addr())
	fmt.Fprintln(out, "twice: the second answer is the first one replayed (header idempotency-replayed: true). Ctrl-C stops.")

	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	return srv.Serve(lis.grpc)
}

// serveGateway serves the grpc-gateway REST gateway on lis.http, in front
// of the gRPC server on lis.grpc, until the returned function is called.
// gatewayidempotency turns the Idempotency-Key header into the key, marks
// replays with Idempotent-Replayed and answers the interceptor's errors
// with the IETF draft's statuses.
func serveGateway(lis listeners, tel *telemetry, logger *slog.Logger) (stop func(), err error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if tel != nil {
		opts = append(opts, tel.dialOptions()...)
	}
	conn, err := grpc.NewClient(lis.grpc.Addr().String(), opts...)
	if err != nil {
		return nil, err
	}
	mux := runtime.NewServeMux(gatewayidempotency.ServeMuxOptions()...)
	if err := paymentsgw.RegisterPaymentsHandler(context.Background(), mux, conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(lis.http); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("gateway", slog.Any("err", err))
		}
	}()
	return func() {
		_ = hs.Close()
		_ = conn.Close()
	}, nil
}

// printCurl tells how to call the gateway.
func printCurl(out io.Writer, addr net.Addr) {
	fmt.Fprintf(out, "REST gateway on http://%s (grpc-gateway). Try:\n", addr)
	fmt.Fprintf(out, "  curl -i -X POST http://%s/v1/charges -H 'Idempotency-Key: k1' -d '{\"customer\":\"alice\",\"amount_cents\":1999}'\n", addr)
	fmt.Fprintln(out, "twice: the second answer is the first one replayed (header Idempotent-Replayed: true).")
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
