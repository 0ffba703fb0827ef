package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// serverConfig is what [newServer] builds a server from.
type serverConfig struct {
	store    store.Store
	payments paymentsv1.PaymentsServer
	logger   *slog.Logger
	meter    *meter
	auth     authenticator
	// network, when set, sits between auth and idempotency and loses
	// responses on demand.
	network *lossyNetwork
	// retryAfter is how long an in-flight duplicate is asked to wait
	// (idempotency.WithRetryAfter); 0 keeps the library default.
	retryAfter time.Duration
	// telemetry, when set (-otel), traces calls with otelgrpc and adds the
	// OpenTelemetry observer.
	telemetry *telemetry
	// replayCache is the most completed outcomes the idempotency server
	// keeps in its replay cache ([replayCacheOption]); 0: no cache.
	replayCache int
}

// The bounds of the server modes' replay cache (-replay-cache) besides
// its entries: what idempotency.WithReplayCache is given.
const (
	replayCacheBytes = 64 << 20
	replayCacheTTL   = 5 * time.Minute
)

// replayCacheOption is the replay cache of n entries, taking up to
// [replayCacheBytes], each for up to [replayCacheTTL].
func replayCacheOption(n int) idempotency.ServerOption {
	return idempotency.WithReplayCache(n, replayCacheBytes, replayCacheTTL)
}

// newServer returns a gRPC server serving Payments, the health service and
// server reflection, behind this chain, outermost first:
//
//  1. recovery: a panic anywhere below becomes INTERNAL; the idempotency
//     interceptor has released its claim by then, so a retry runs again;
//  2. logging: one line per call, through slog;
//  3. auth: bearer token to principal, refused calls never reach the store;
//  4. (demo only) the lossy network;
//  5. selector: idempotency for payments.v1.Payments only, with the
//     principal as the key scope.
//
// With c.telemetry (-otel), otelgrpc's stats handler gives every call a
// span, and the OpenTelemetry observer records each decision beside the
// slog and metrics observer. It also returns the health server, to flip its
// status, and the idempotency server, to read its replay cache's figures
// and to close it after the gRPC server has stopped.
func newServer(c serverConfig) (*grpc.Server, *health.Server, *idempotency.Server) {
	observer := newObserver(c.logger, c.meter)
	var serverOpts []grpc.ServerOption
	if c.telemetry != nil {
		observer = observers(observer, c.telemetry.observer())
		serverOpts = append(serverOpts, grpc.StatsHandler(c.telemetry.serverHandler()))
	}
	opts := []idempotency.ServerOption{
		idempotency.WithScope(principalScope),
		idempotency.WithObserver(observer),
	}
	if c.retryAfter > 0 {
		opts = append(opts, idempotency.WithRetryAfter(c.retryAfter))
	}
	if c.replayCache > 0 {
		opts = append(opts, replayCacheOption(c.replayCache))
	}
	idem := idempotency.NewServer(c.store, opts...)
	chain := []grpc.UnaryServerInterceptor{
		recovery.UnaryServerInterceptor(recovery.WithRecoveryHandlerContext(panicHandler(c.logger))),
		logging.UnaryServerInterceptor(slogAdapter(c.logger), logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(callLevel)),
		auth.UnaryServerInterceptor(c.auth.authenticate),
	}
	if c.network != nil {
		chain = append(chain, c.network.intercept)
	}
	chain = append(chain, selector.UnaryServerInterceptor(
		idem.UnaryServerInterceptor(),
		selector.MatchFunc(isPayments),
	))

	srv := grpc.NewServer(append(serverOpts, grpc.ChainUnaryInterceptor(chain...))...)
	paymentsv1.RegisterPaymentsServer(srv, c.payments)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs, idem
}

// isPayments matches the calls the idempotency interceptor handles.
func isPayments(_ context.Context, cm interceptors.CallMeta) bool {
	return cm.Service == paymentsv1.Payments_ServiceDesc.ServiceName
}

// slogAdapter lets go-grpc-middleware's logging interceptor write to slog.
func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// callLevel logs calls at Info, and at Error only when the server failed:
// refusals such as a reused key or an in-flight duplicate are the library
// doing its job, not warnings.
func callLevel(code codes.Code) logging.Level {
	switch code {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return logging.LevelError
	}
	return logging.LevelInfo
}

// panicHandler logs a recovered panic and answers INTERNAL without its
// text.
func panicHandler(l *slog.Logger) recovery.RecoveryHandlerFuncContext {
	return func(ctx context.Context, p any) error {
		l.ErrorContext(ctx, "recovered from panic", slog.Any("panic", p))
		return status.Error(codes.Internal, "internal error")
	}
}
