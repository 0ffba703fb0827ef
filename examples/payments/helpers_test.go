package main

import (
	"errors"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"

	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// rig is a test server built by [newServer] on a loopback port.
type rig struct {
	addr    string
	ledger  *Ledger
	meter   *meter
	network *lossyNetwork
	health  *health.Server
	logs    *syncBuffer
}

// startRig starts a server with the full chain on the memory store. edit,
// if set, adjusts the config first.
func startRig(t *testing.T, edit func(*serverConfig)) *rig {
	t.Helper()
	s := memorystore.New()
	t.Cleanup(func() { _ = s.Close() })
	r := &rig{ledger: NewLedger(), meter: newMeter(), network: &lossyNetwork{}, logs: &syncBuffer{}}
	cfg := serverConfig{
		store:    s,
		payments: &paymentsService{ledger: r.ledger},
		logger:   slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		meter:    r.meter,
		auth:     authenticator{tokens: demoTokens},
		network:  r.network,
	}
	if edit != nil {
		edit(&cfg)
	}
	srv, hs, _ := newServer(cfg)
	r.health = hs
	r.addr = listen(t, srv)
	return r
}

// listen serves srv on a loopback port until the test ends.
func listen(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// conn dials r as the holder of token through chain.
func (r *rig) conn(t *testing.T, token string, chain ...grpc.UnaryClientInterceptor) *grpc.ClientConn {
	t.Helper()
	cc, err := dial(r.addr, token, r.meter, nil, chain...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// dialNoToken is [dial] with an optional token and no interceptors, for
// callers that handle metadata themselves.
func dialNoToken(addr, token string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(token)))
	}
	return grpc.NewClient(addr, opts...)
}
