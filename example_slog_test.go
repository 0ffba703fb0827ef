package idempotency_test

import (
	"context"
	"log"
	"log/slog"
	"os"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// NewSlogObserver writes one structured line per decision: here a
// charge, then its redelivery, replayed. The store key names the call
// in the log (and in the store, for an operator who looks it up or
// purges it); the client's key stays out unless WithSlogClientKey asks
// for it. The handler drops the time and the store time, which change
// from run to run.
func ExampleNewSlogObserver() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "store_time" {
				return slog.Attr{}
			}
			return a
		},
	}))
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory, idempotency.WithObserver(idempotency.NewSlogObserver(logger)))

	for range 2 {
		_, err := idempotency.Once(context.Background(), idem, "payments.charge", "evt_42", wrapperspb.Int64(4200),
			func(ctx context.Context) error { return nil })
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// level=INFO msg="idempotency decision" method=payments.charge operation=payments.charge decision=executed store_key=EgIKgTLfyIIfXR5Dd81GlDb3QGuJSXyqIafLHwERAsA
	// level=INFO msg="idempotency decision" method=payments.charge operation=payments.charge decision=replayed store_key=EgIKgTLfyIIfXR5Dd81GlDb3QGuJSXyqIafLHwERAsA
}
