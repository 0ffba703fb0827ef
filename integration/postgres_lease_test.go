package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// TestPostgresLeaseLostMidHandler is proof 2: server 1's handler has
// written its ledger row when its lease runs out (the process was paused
// past it: the test moves the lease's end into the past in the database),
// and server 2 takes the key over and writes its own row. Server 1 resumes
// first, while server 2's claim is in flight: its CompleteTx fails with
// ErrLeaseLost and its transaction rolls back. Then server 2 completes, and
// its single execution is the only ledger row, replayed to every later
// call.
func TestPostgresLeaseLostMidHandler(t *testing.T) {
	t.Parallel()
	l := newPGLedger(t)
	pause := func(written chan<- struct{}, resume <-chan struct{}) func(context.Context, *pgServer) {
		return func(context.Context, *pgServer) {
			close(written)
			<-resume
		}
	}
	written1, resume1 := make(chan struct{}), make(chan struct{})
	written2, resume2 := make(chan struct{}), make(chan struct{})
	var release1, release2 sync.Once // a failing test lets the handlers go
	defer release1.Do(func() { close(resume1) })
	defer release2.Do(func() { close(resume2) })
	completeErr := make(chan error, 1)
	paused := l.server(t, pgServerConfig{id: 1, hooks: pgHooks{beforeComplete: pause(written1, resume1), completeErr: completeErr},
		client: []idempotency.ClientOption{idempotency.WithoutRetry()}})
	other := l.server(t, pgServerConfig{id: 2, hooks: pgHooks{beforeComplete: pause(written2, resume2)}})

	ctx := withKey(t.Context(), "k-lost")
	req := &testingv1.DoRequest{Payload: "lost"}
	call := func(s *pgServer) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.client.Do(ctx, req)
			done <- err
		}()
		return done
	}
	first := call(paused)
	<-written1
	if _, err := l.admin.Exec(t.Context(), "UPDATE "+l.records()+" SET expires_at = clock_timestamp() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	second := call(other)
	<-written2 // server 2 owns the key now, and has written its row
	release1.Do(func() { close(resume1) })
	if err := <-completeErr; !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("server 1's CompleteTx: %v, want ErrLeaseLost", err)
	}
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Fatalf("server 1's call: %v, want its UNAVAILABLE", err)
	}
	release2.Do(func() { close(resume2) })
	if err := <-second; err != nil {
		t.Fatalf("server 2's call: %v", err)
	}
	for _, s := range []*pgServer{paused, other} {
		var header metadata.MD
		resp, err := s.client.Do(ctx, req, grpc.Header(&header))
		if err != nil || resp.GetPayload() != "lost" || resp.GetAmount() != 2 || !replayedMD(header) {
			t.Fatalf("retry on server %d: %v, %v; want server 2's answer, replayed", s.id, resp, err)
		}
	}
	if n := l.rows(t, "lost"); n != 1 {
		t.Fatalf("the ledger holds %d charges, want exactly server 2's", n)
	}
	var server int
	if err := l.admin.QueryRow(t.Context(), "SELECT server FROM "+l.schema+".ledger").Scan(&server); err != nil || server != 2 {
		t.Fatalf("the charge is server %d's (%v), want server 2's", server, err)
	}
}

// TestPostgresConcurrentTakeover is proof 5: two servers take over the
// same expired lease at the same moment, round after round: exactly one
// wins each time. First straight on two stores (each a server's pool),
// then through two gRPC servers, where exactly one runs the handler.
func TestPostgresConcurrentTakeover(t *testing.T) {
	t.Parallel()
	l := newPGLedger(t)
	noRetry := []idempotency.ClientOption{idempotency.WithoutRetry()}
	a, b := l.server(t, pgServerConfig{id: 1, client: noRetry}), l.server(t, pgServerConfig{id: 2, client: noRetry})

	t.Run("stores", func(t *testing.T) {
		const rounds = 100
		for r := range rounds {
			key := fmt.Sprintf("store-%d", r)
			expire(t, a.store, key)
			var wg sync.WaitGroup
			claims := make([]store.ClaimResult, 2)
			errs := make([]error, 2)
			start := make(chan struct{})
			for i, s := range []*postgresstore.Store{a.store, b.store} {
				wg.Go(func() {
					<-start
					claims[i], errs[i] = s.Claim(t.Context(), key, []byte{byte(i)}, time.Minute, store.ClaimOptions{})
				})
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if claims[0].Won() == claims[1].Won() {
				t.Fatalf("round %d: won %v and %v, want exactly one winner", r, claims[0].Won(), claims[1].Won())
			}
			loser := claims[0]
			if loser.Won() {
				loser = claims[1]
			}
			if loser.Existing.State != store.StateInFlight {
				t.Fatalf("round %d: the loser sees %v, want the winner's claim in flight", r, loser.Existing.State)
			}
		}
	})

	t.Run("servers", func(t *testing.T) {
		// Round after round, a third server claims the key and hangs in
		// its handler past its lease (moved into the past in the
		// database), and then a and b are called with the key at once.
		written, resume := make(chan struct{}), make(chan struct{})
		dead := l.server(t, pgServerConfig{id: 3, hooks: pgHooks{beforeComplete: func(context.Context, *pgServer) {
			written <- struct{}{}
			<-resume
		}}, client: []idempotency.ClientOption{idempotency.WithoutRetry()}})
		const rounds = 20
		for r := range rounds {
			payload := fmt.Sprintf("takeover-%d", r)
			ctx := withKey(t.Context(), payload)
			req := &testingv1.DoRequest{Payload: payload}
			deadErr := make(chan error, 1)
			go func() {
				_, err := dead.client.Do(ctx, req)
				deadErr <- err
			}()
			<-written
			if _, err := l.admin.Exec(t.Context(), "UPDATE "+l.records()+" SET expires_at = clock_timestamp() - interval '1 second' WHERE state = 1"); err != nil {
				t.Fatal(err)
			}
			execs := a.srv.Service.Executions() + b.srv.Service.Executions()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			start := make(chan struct{})
			for i, s := range []*pgServer{a, b} {
				wg.Go(func() {
					<-start
					_, errs[i] = s.client.Do(ctx, req)
				})
			}
			close(start)
			wg.Wait()
			resume <- struct{}{}
			if err := <-deadErr; status.Code(err) != codes.Unavailable {
				t.Fatalf("round %d: the hung server's call: %v, want UNAVAILABLE (its CompleteTx refused)", r, err)
			}
			for _, err := range errs {
				if err != nil && status.Code(err) != codes.Aborted {
					t.Fatalf("round %d: %v, want the charge or ABORTED in use", r, err)
				}
			}
			ran := a.srv.Service.Executions() + b.srv.Service.Executions() - execs
			if rows := l.rows(t, payload); ran != 1 || rows != 1 {
				t.Fatalf("round %d: a and b ran the handler %d times, %d ledger rows; want 1 and 1", r, ran, rows)
			}
		}
	})
}

// expire leaves key with a claim whose lease has run out.
func expire(t *testing.T, s *postgresstore.Store, key string) {
	t.Helper()
	c, err := s.Claim(t.Context(), key, []byte("dead server"), time.Millisecond, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim(%s): %v, won=%v", key, err, c.Won())
	}
	time.Sleep(5 * time.Millisecond)
}

// replayedMD reports whether header carries the replay marker.
func replayedMD(header metadata.MD) bool {
	return slices.Contains(header.Get(idempotency.ReplayedKey), "true")
}
