package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/grpc-idempotency/idempotency/otelidempotency"
	"github.com/grpc-idempotency/idempotency/store"
)

// newPrometheusTelemetry is the OpenTelemetry SDK of -prometheus: the
// metrics go to a registry of their own through the OTel Prometheus
// exporter, which turns the OTel names into Prometheus ones (dots to
// underscores, the unit as a suffix, _total on counters); spans are
// made, so that the observer annotates them, and exported nowhere.
func newPrometheusTelemetry() (*telemetry, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	res := resource.NewSchemaless(semconv.ServiceName("payments"))
	return &telemetry{
		tp: sdktrace.NewTracerProvider(sdktrace.WithResource(res)),
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exporter)),
	}, reg, nil
}

// servePrometheus serves t's metrics, with the gauges of st, on lis, path
// /metrics, until the returned function is called.
func servePrometheus(lis net.Listener, t *telemetry, reg *prometheus.Registry, st store.Store, logger *slog.Logger) (stop func(), err error) {
	if inspector, ok := st.(store.Inspector); ok {
		// Stats at most once a minute (the default): scrapes in between
		// report the figures read last.
		gauges, err := otelidempotency.RegisterStoreMetrics(inspector, otelidempotency.WithMeterProvider(t.mp))
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = gauges.Unregister()
			}
		}()
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("prometheus", slog.Any("err", err))
		}
	}()
	return func() { _ = hs.Close() }, nil
}
