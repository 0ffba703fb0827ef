package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

// chapterTransactional is the story's chapter that only a store that
// records the answer in the handler's transaction can tell: PostgreSQL,
// MySQL and SQLite.
func chapterTransactional(st *story) []struct {
	title string
	do    func(context.Context) error
} {
	return []struct {
		title string
		do    func(context.Context) error
	}{{"A server that commits and dies before answering", st.diesAfterCommit}}
}

// replica is one of two servers on the same database, with counters of
// its own.
type replica struct {
	addr  string
	meter *meter
	srv   *grpc.Server
	done  chan struct{}
}

// startReplica starts a server on a loopback port, serving Charge from
// the backend's ledger; afterCommit runs after each commit.
func startReplica(b *backend, logger *slog.Logger, afterCommit func()) (*replica, error) {
	r := &replica{meter: newMeter(), done: make(chan struct{})}
	r.srv, _, _ = newServer(serverConfig{
		store:    b.store,
		payments: b.replica(afterCommit),
		logger:   logger,
		meter:    r.meter,
		auth:     authenticator{tokens: demoTokens},
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = lis.Addr().String()
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(lis)
	}()
	return r, nil
}

// stop stops the server at once, as a process that dies: its connections
// close, and nothing it has not sent yet is sent.
func (r *replica) stop() {
	r.srv.Stop()
	<-r.done
}

// diesAfterCommit: server A commits the charge with its recorded answer and
// dies before answering. The client's retry, with the same key, reaches
// server B, which replays the committed answer: one charge in the ledger.
func (s *story) diesAfterCommit(ctx context.Context) error {
	const customer, amount = "dave", 4200
	key := s.key("order-6")
	logger := newLogger(config{})
	var a *replica
	var die sync.Once
	a, err := startReplica(s.backend, logger, func() { die.Do(a.stop) })
	if err != nil {
		return err
	}
	defer die.Do(a.stop)
	b, err := startReplica(s.backend, logger, nil)
	if err != nil {
		return err
	}
	defer b.stop()

	// One client for both servers, as behind a load balancer: it uses A
	// while A is up, then B.
	rs := manual.NewBuilderWithScheme("replicas")
	rs.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.addr}, {Addr: b.addr}}})
	conn, err := grpc.NewClient(rs.Scheme()+":///payments",
		grpc.WithResolvers(rs),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearerToken(tokenA)),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(), countAttempts(s.meter)))
	if err != nil {
		return err
	}
	defer conn.Close()

	s.say("   Servers A (%s) and B (%s) share the database. Charge %s %s with key %s;\n", a.addr, b.addr, customer, money(amount), key)
	s.say("   A commits the charge with its recorded answer, then dies before answering.\n")
	var header metadata.MD
	resp, err := paymentsv1.NewPaymentsClient(conn).Charge(ctx, &paymentsv1.ChargeRequest{Customer: customer, AmountCents: amount},
		idempotency.WithKey(key), grpc.Header(&header))
	if err != nil {
		return fmt.Errorf("charge failed: %w", err)
	}
	s.moreCharges++
	replayed := slices.Contains(header.Get(idempotency.ReplayedKey), "true")
	aRan := a.meter.decisions(chargeMethod, idempotency.DecisionExecuted)
	bReplayed := b.meter.decisions(chargeMethod, idempotency.DecisionReplayed)
	s.say("   A executed %d; B replayed %d; the client got %s for %s, replayed from the store: %t\n",
		aRan, bReplayed, resp.GetPayment().GetId(), money(resp.GetPayment().GetAmountCents()), replayed)
	s.say("   the ledger holds %d charge(s) for %s, %s paid\n", s.ledger.ChargesOf(customer), customer, money(s.ledger.Paid(customer)))
	switch {
	case aRan != 1 || bReplayed != 1:
		return fmt.Errorf("server A executed %d and server B replayed %d, want 1 and 1", aRan, bReplayed)
	case !replayed:
		return errors.New("the retry was not answered from the store")
	case s.ledger.ChargesOf(customer) != 1 || s.ledger.Paid(customer) != amount:
		return fmt.Errorf("%s has %d charges, %s paid; want 1 charge of %s", customer, s.ledger.ChargesOf(customer), money(s.ledger.Paid(customer)), money(amount))
	}
	s.say("   ok: charged once; the answer committed with the charge, so B could give it\n")
	return nil
}
