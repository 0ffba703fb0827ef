// Command killserver is the kill tests' server: one unary method
// ([killpoint.Method]) behind the idempotency interceptor over a shared
// store, whose handler records a side effect outside the process, and
// which stops at the point named by -kill-at and waits there to be
// killed. The kill tests build it, run it as real OS processes and kill
// it with SIGKILL; it is not a server to deploy. The deploy test also
// stops it with SIGTERM, on which it stops serving gracefully and closes
// its stores, and restarts it on a [migratestore] from the SQLite file of
// the first process (-from-sqlite).
//
// It writes [killpoint.Listening] on its standard output once it serves,
// and [killpoint.At] when a call reaches the kill point. It exits when its
// standard input closes, so that a test process that dies leaves none
// behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "killserver:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	listen                  string
	storeKind, storeURL     string
	table                   string
	fromSQLite              string
	effectKind, effectURL   string
	effectTable             string
	killAt                  killpoint.Point
	killKeys                string
	abandoned               idempotency.AbandonPolicy
	lease, wait, retryAfter time.Duration
}

func parseFlags() (config, error) {
	var c config
	var killAt string
	flag.StringVar(&c.listen, "listen", "127.0.0.1:0", "address to serve on")
	flag.StringVar(&c.storeKind, "store", "", "the idempotency store: redis, postgres, mysql or sqlite")
	flag.StringVar(&c.storeURL, "store-url", "", "the store's Redis address, PostgreSQL URL, MySQL DSN or SQLite file")
	flag.StringVar(&c.table, "table", "", "the store's table (postgres, mysql)")
	flag.StringVar(&c.fromSQLite, "from-sqlite", "", "a SQLite file: serve on a migratestore from the sqlitestore on it to -store")
	flag.StringVar(&c.effectKind, "effect", "", "where the side effect is recorded: redis (a list per key), postgres or sqlite (a row)")
	flag.StringVar(&c.effectURL, "effect-url", "", "the Redis address, PostgreSQL URL or SQLite file of the side effect")
	flag.StringVar(&c.effectTable, "effect-table", "", "the SQL table of the side effect (columns key, pid)")
	flag.StringVar(&killAt, "kill-at", "", "the point at which a call stops and waits to be killed; none when empty")
	flag.StringVar(&c.killKeys, "kill-keys", "", "only calls whose key begins with this prefix stop at -kill-at; every call when empty")
	abandoned := flag.String("abandoned", "rerun", "idempotency.WithAbandonedClaims: rerun, block, or recover (the method's RecoverFunc reads the side effect)")
	flag.DurationVar(&c.lease, "lease", 2*time.Second, "idempotency.WithLease")
	flag.DurationVar(&c.wait, "wait", 30*time.Second, "idempotency.WithWaitForInFlight")
	flag.DurationVar(&c.retryAfter, "retry-after", 100*time.Millisecond, "idempotency.WithRetryAfter")
	flag.Parse()
	c.killAt = killpoint.Point(killAt)
	var ok bool
	if c.abandoned, ok = abandonPolicies[*abandoned]; !ok {
		return c, fmt.Errorf("-abandoned %q: want rerun, block or recover", *abandoned)
	}
	if killAt != "" && !c.killAt.Valid() {
		return c, fmt.Errorf("-kill-at %q: not one of %v", killAt, killpoint.Points)
	}
	return c, nil
}

// abandonPolicies are the values of -abandoned.
var abandonPolicies = map[string]idempotency.AbandonPolicy{
	"rerun":   idempotency.AbandonRerun,
	"block":   idempotency.AbandonBlock,
	"recover": idempotency.AbandonRecover,
}

func run() error {
	c, err := parseFlags()
	if err != nil {
		return err
	}
	ctx := context.Background()
	st, closeStore, err := openServed(ctx, c.storeKind, c.storeURL, c.table, c.fromSQLite)
	if err != nil {
		return err
	}
	defer closeStore()
	eff, err := openEffects(ctx, c.effectKind, c.effectURL, c.effectTable)
	if err != nil {
		return err
	}
	defer eff.close()

	hook := &hook{at: c.killAt, keys: c.killKeys, out: os.Stdout}
	opts := []idempotency.ServerOption{
		idempotency.WithLease(c.lease),
		idempotency.WithWaitForInFlight(c.wait),
		idempotency.WithRetryAfter(c.retryAfter),
		idempotency.WithObserver(hook),
	}
	if c.abandoned == idempotency.AbandonRecover {
		// A recovery is the method's own.
		opts = append(opts, idempotency.WithMethodPolicy(killpoint.Method, idempotency.MethodPolicy{
			Abandoned: idempotency.AbandonRecover,
			Recover:   eff.recoverCharge,
		}))
	} else {
		// One option for the whole server, as a team that moves money
		// sets it.
		opts = append(opts, idempotency.WithAbandonedClaims(c.abandoned))
	}
	srv := idempotency.NewServer(st, opts...)
	defer func() { _ = srv.Close() }()
	pid := strconv.Itoa(os.Getpid())
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(hook.afterComplete, srv.UnaryServerInterceptor()))
	killpoint.Register(gs, func(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		key := req.GetValue()
		hook.reach(killpoint.BeforeEffect, key)
		if err := eff.record(ctx, key, pid); err != nil {
			return nil, err // not a status: UNKNOWN, which releases the claim
		}
		hook.reach(killpoint.AfterEffect, key)
		return wrapperspb.String(pid), nil
	})

	lis, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	hook.println(killpoint.Listening(lis.Addr().String()))
	go func() {
		// The test holds the other end of standard input: when it ends,
		// so does this process.
		_, _ = io.Copy(io.Discard, os.Stdin)
		gs.Stop()
	}()
	go func() {
		// A deploy: the calls under way end, then the stores close.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		<-term
		gs.GracefulStop()
	}()
	return gs.Serve(lis)
}
