package idempotency_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// The server chain with go-grpc-middleware, outermost first: recovery,
// logging, authentication (so that WithScope can read the principal),
// request validation (so that an invalid request never touches the store
// nor uses up its key), then the idempotency interceptor, for the payments
// service only.
func ExampleUnaryServerInterceptor_chain() {
	memory := memorystore.New()
	defer memory.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: stableLogAttrs}))

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		recovery.UnaryServerInterceptor(), // a panic below becomes INTERNAL; the claim is released first
		logging.UnaryServerInterceptor(slogLogger(logger), logging.WithLogOnEvents(logging.FinishCall)),
		auth.UnaryServerInterceptor(authenticateBearer), // bearer token -> principal, for WithScope
		validateRequest, // INVALID_ARGUMENT before any key is claimed
		selector.UnaryServerInterceptor(
			idempotency.UnaryServerInterceptor(memory, idempotency.WithScope(principalScope)),
			selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
				return c.Service == "shop.v1.PaymentsService"
			}),
		),
	))
	registerPaymentsServer(srv, &paymentsServer{})
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn", serveInMemory(srv),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	alice := metadata.AppendToOutgoingContext(context.Background(),
		"authorization", "Bearer alice-token", idempotency.MetadataKey, "order-7")
	for _, call := range []struct {
		ctx   context.Context
		cents int64
	}{
		{alice, -700},               // invalid: refused before the store, key not used up
		{alice, 700},                // the same key, fixed: charged
		{alice, 700},                // a retry: replayed
		{context.Background(), 700}, // no token: refused by auth
	} {
		var header metadata.MD
		resp, err := charge(call.ctx, conn, call.cents, grpc.Header(&header))
		if err != nil {
			fmt.Println("->", status.Code(err))
			continue
		}
		fmt.Println("->", resp.GetValue(), "replayed:", header.Get(idempotency.ReplayedKey))
	}
	// Output:
	// level=INFO msg="finished call" grpc.code=InvalidArgument
	// -> InvalidArgument
	// level=INFO msg="finished call" grpc.code=OK
	// -> ch_1 replayed: []
	// level=INFO msg="finished call" grpc.code=OK
	// -> ch_1 replayed: [true]
	// level=INFO msg="finished call" grpc.code=Unauthenticated
	// -> Unauthenticated
}

// slogLogger adapts a *slog.Logger to go-grpc-middleware's logging.Logger.
func slogLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// principalKey is the context key of the authenticated principal.
type principalKey struct{}

// authenticateBearer maps a bearer token to its principal. In production: verify
// the token.
func authenticateBearer(ctx context.Context) (context.Context, error) {
	token, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, err
	}
	principals := map[string]string{"alice-token": "alice"}
	p, ok := principals[token]
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// principalScope scopes keys by the principal that authenticateBearer found.
func principalScope(ctx context.Context) (string, error) {
	p, ok := ctx.Value(principalKey{}).(string)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no principal")
	}
	return p, nil
}

// validateRequest refuses a charge of no money. It checks the request
// alone (no database), so the same request is always refused the same
// way; checks that depend on state belong in the handler, whose answer is
// stored and replayed.
func validateRequest(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if c, ok := req.(*wrapperspb.Int64Value); ok && c.GetValue() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "amount must be positive")
	}
	return handler(ctx, req)
}

// stableLogAttrs keeps the log lines of the example the same on every
// run: it drops the time and the fields that change between runs.
func stableLogAttrs(_ []string, a slog.Attr) slog.Attr {
	switch a.Key {
	case slog.LevelKey, slog.MessageKey, "grpc.code":
		return a
	}
	return slog.Attr{}
}
