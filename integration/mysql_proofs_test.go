package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// The proofs of transactional completion on MySQL (MariaDB), as
// postgres_*_test.go gives them on PostgreSQL: a handler inserts a ledger
// row and records its answer with CompleteTx in one transaction.

// TestMySQLCommitThenPanic: server 1 commits the charge with its recorded
// answer and panics before answering, as a process that dies after its
// commit. The recovery interceptor answers INTERNAL; the interceptor's
// release after the panic finds the committed record and leaves it; the
// retry on server 2 replays it, and the ledger holds one charge.
func TestMySQLCommitThenPanic(t *testing.T) {
	t.Parallel()
	l := newMyLedger(t)
	dies := l.server(t, myServerConfig{id: 1, hooks: myHooks{afterCommit: func(context.Context, *myServer) {
		panic("the process dies before answering")
	}}, client: []idempotency.ClientOption{idempotency.WithoutRetry()}})
	other := l.server(t, myServerConfig{id: 2})

	ctx := withKey(t.Context(), "k-panic")
	req := &testingv1.DoRequest{Payload: "panic"}
	if _, err := dies.client.Do(ctx, req); status.Code(err) != codes.Internal {
		t.Fatalf("server 1: %v, want INTERNAL from the recovery interceptor", err)
	}
	if got := l.states(t); !slices.Equal(got, []int{2}) {
		t.Fatalf("rows after the panic and its release: states %v, want one completed row", got)
	}
	var header metadata.MD
	resp, err := other.client.Do(ctx, req, grpc.Header(&header))
	if err != nil || resp.GetPayload() != "panic" || resp.GetAmount() != 1 || !replayedMD(header) {
		t.Fatalf("retry on server 2: %v, %v, header %v; want server 1's charge, replayed", resp, err, header)
	}
	if n := other.srv.Service.Executions(); n != 0 {
		t.Fatalf("server 2 ran the handler %d times, want 0", n)
	}
	if n := l.rows(t, "panic"); n != 1 {
		t.Fatalf("the ledger holds %d charges, want 1", n)
	}
}

// TestMySQLCommitFaults: the handler's database connection (through a
// fault proxy, on a pool of one connection) is cut before the commit or
// after it, or the commit's answer is lost. The client retries with the
// same key (its interceptor retries UNAVAILABLE), then calls once more. In
// every case the ledger ends with exactly one charge, and every answer is
// the charge: the single execution's, or its replay.
func TestMySQLCommitFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		hooks      func(fault func() bool) myHooks
		executions int64 // 1 when the first commit landed, 2 when it did not
	}{
		{"cut before the commit", func(fault func() bool) myHooks {
			return myHooks{beforeCommit: func(_ context.Context, s *myServer) {
				if fault() {
					s.proxy.CutAll()
				}
			}}
		}, 2},
		{"cut after the commit", func(fault func() bool) myHooks {
			return myHooks{afterCommit: func(_ context.Context, s *myServer) {
				if fault() {
					s.proxy.CutAll()
				}
			}}
		}, 1},
		{"answer to the commit lost", func(fault func() bool) myHooks {
			return myHooks{beforeCommit: func(_ context.Context, s *myServer) {
				if fault() {
					s.proxy.CutNextReply(1)
				}
			}}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newMyLedger(t)
			var faults atomic.Int64
			fault := func() bool { return faults.Add(1) == 1 } // the first execution only
			s := l.server(t, myServerConfig{id: 1, proxied: true, maxConns: 1, hooks: tc.hooks(fault),
				client: []idempotency.ClientOption{idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 50 * time.Millisecond })}})
			payload := fmt.Sprintf("fault-%d", len(tc.name))
			ctx := withKey(t.Context(), "k-"+payload)
			req := &testingv1.DoRequest{Payload: payload}
			for i := range 2 {
				var header metadata.MD
				resp, err := s.client.Do(ctx, req, grpc.Header(&header))
				if err != nil || resp.GetPayload() != payload {
					t.Fatalf("call %d: %v, %v; want the charge", i, resp, err)
				}
				if i == 1 && !replayedMD(header) {
					t.Fatal("the call after the charge was not a replay")
				}
			}
			if faults.Load() == 0 {
				t.Fatal("the fault never ran")
			}
			if n := s.srv.Service.Executions(); n != tc.executions {
				t.Fatalf("handler ran %d times, want %d", n, tc.executions)
			}
			if n := l.rows(t, payload); n != 1 {
				t.Fatalf("the ledger holds %d charges, want exactly 1", n)
			}
		})
	}
}

// TestMySQLLeaseLostMidHandler: server 1's handler has written its ledger
// row when its lease runs out (the process was paused past it: the test
// moves the lease's end into the past in the database), and server 2
// takes the key over and writes its own row. Server 1 resumes first, while
// server 2's claim is in flight: its CompleteTx fails with ErrLeaseLost
// and its transaction rolls back, so a transaction held past its lease
// cannot commit a record. Then server 2 completes, and its single
// execution is the only ledger row, replayed to every later call.
func TestMySQLLeaseLostMidHandler(t *testing.T) {
	t.Parallel()
	l := newMyLedger(t)
	pause := func(written chan<- struct{}, resume <-chan struct{}) func(context.Context, *myServer) {
		return func(context.Context, *myServer) {
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
	paused := l.server(t, myServerConfig{id: 1, hooks: myHooks{beforeComplete: pause(written1, resume1), completeErr: completeErr},
		client: []idempotency.ClientOption{idempotency.WithoutRetry()}})
	other := l.server(t, myServerConfig{id: 2, hooks: myHooks{beforeComplete: pause(written2, resume2)}})

	ctx := withKey(t.Context(), "k-lost")
	req := &testingv1.DoRequest{Payload: "lost"}
	call := func(s *myServer) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.client.Do(ctx, req)
			done <- err
		}()
		return done
	}
	first := call(paused)
	<-written1
	if _, err := l.admin.ExecContext(t.Context(), "UPDATE "+l.records()+" SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"); err != nil {
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
	for _, s := range []*myServer{paused, other} {
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
	if err := l.admin.QueryRowContext(t.Context(), "SELECT server FROM "+l.ledger()).Scan(&server); err != nil || server != 2 {
		t.Fatalf("the charge is server %d's (%v), want server 2's", server, err)
	}
}

// TestMySQLConcurrentTakeover: two servers take over the same expired
// lease at the same moment, round after round: exactly one wins each
// time. First straight on two stores (each a server's pool), then through
// two gRPC servers, where exactly one runs the handler while the server
// whose lease ran out cannot commit.
func TestMySQLConcurrentTakeover(t *testing.T) {
	t.Parallel()
	l := newMyLedger(t)
	noRetry := []idempotency.ClientOption{idempotency.WithoutRetry()}
	a, b := l.server(t, myServerConfig{id: 1, client: noRetry}), l.server(t, myServerConfig{id: 2, client: noRetry})

	t.Run("stores", func(t *testing.T) {
		const rounds = 100
		for r := range rounds {
			key := fmt.Sprintf("store-%d", r)
			c, err := a.store.Claim(t.Context(), key, []byte("dead server"), time.Millisecond, store.ClaimOptions{})
			if err != nil || !c.Won() {
				t.Fatalf("Claim(%s): %v, won=%v", key, err, c.Won())
			}
			time.Sleep(5 * time.Millisecond)
			var wg sync.WaitGroup
			claims := make([]store.ClaimResult, 2)
			errs := make([]error, 2)
			start := make(chan struct{})
			for i, s := range []*mysqlstore.Store{a.store, b.store} {
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
		}
	})

	t.Run("servers", func(t *testing.T) {
		written, resume := make(chan struct{}), make(chan struct{})
		dead := l.server(t, myServerConfig{id: 3, hooks: myHooks{beforeComplete: func(context.Context, *myServer) {
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
			if _, err := l.admin.ExecContext(t.Context(), "UPDATE "+l.records()+" SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE state = 1"); err != nil {
				t.Fatal(err)
			}
			execs := a.srv.Service.Executions() + b.srv.Service.Executions()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			start := make(chan struct{})
			for i, s := range []*myServer{a, b} {
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

// TestMySQLFourServersOneKey: four servers, each with pools of its own on
// one database, and 200 concurrent callers sending one key with one
// request, spread over the servers; each caller's client retries while
// the key is in use. The handler charges once: one ledger row, and all
// 200 callers get the same answer.
func TestMySQLFourServersOneKey(t *testing.T) {
	t.Parallel()
	const servers, callers = 4, 200
	l := newMyLedger(t)
	slow := myHooks{beforeComplete: func(ctx context.Context, _ *myServer) {
		time.Sleep(50 * time.Millisecond) // the card network: duplicates pile up
	}}
	client := []idempotency.ClientOption{
		idempotency.WithMaxAttempts(100),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }),
	}
	srvs := make([]*myServer, servers)
	for i := range srvs {
		srvs[i] = l.server(t, myServerConfig{id: i + 1, maxConns: 4, hooks: slow, client: client,
			opts: []idempotency.ServerOption{idempotency.WithRetryAfter(10 * time.Millisecond)}})
	}
	ctx := withKey(t.Context(), "k-one")
	req := &testingv1.DoRequest{Payload: "one"}
	answers := make([]*testingv1.DoResponse, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = srvs[i%servers].client.Do(ctx, req)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	var execs int64
	for _, s := range srvs {
		execs += s.srv.Service.Executions()
	}
	if execs != 1 {
		t.Fatalf("the handler ran %d times over four servers, want 1", execs)
	}
	if n := l.rows(t, "one"); n != 1 {
		t.Fatalf("the ledger holds %d charges, want 1", n)
	}
	want := proto.Clone(answers[0]).(*testingv1.DoResponse)
	want.Execution = 0
	for i, a := range answers {
		got := proto.Clone(a).(*testingv1.DoResponse)
		got.Execution = 0
		if !proto.Equal(got, want) {
			t.Fatalf("caller %d got %v, caller 0 got %v", i, a, answers[0])
		}
	}
}

// TestMySQLSmallPools: two servers whose store and handler share a pool of
// one connection, and 40 callers over 10 keys at once. While a handler's
// transaction holds the pool's one connection, nothing the call needs may
// wait for another: CompleteTx runs on the transaction's connection (the
// first time, before the store has prepared it, too). Every call is
// answered well within the lease, without a lease lost, and each key is
// charged once.
func TestMySQLSmallPools(t *testing.T) {
	t.Parallel()
	const keys, callers = 10, 40
	l := newMyLedger(t)
	client := []idempotency.ClientOption{
		idempotency.WithMaxAttempts(500),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }),
	}
	srvs := make([]*myServer, 2)
	for i := range srvs {
		srvs[i] = l.server(t, myServerConfig{id: i + 1, maxConns: 1, client: client,
			opts: []idempotency.ServerOption{idempotency.WithRetryAfter(10 * time.Millisecond)}})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second) // the lease is a minute
	defer cancel()
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			payload := fmt.Sprintf("small-%d", i%keys)
			_, errs[i] = srvs[i%2].client.Do(withKey(ctx, payload), &testingv1.DoRequest{Payload: payload})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	for k := range keys {
		if n := l.rows(t, fmt.Sprintf("small-%d", k)); n != 1 {
			t.Fatalf("key %d charged %d times, want once", k, n)
		}
	}
	for _, s := range srvs {
		if n := s.events.Count(idempotency.DecisionLeaseLost); n != 0 {
			t.Fatalf("server %d: %d lease-lost events, want none", s.id, n)
		}
	}
}

// TestMySQLTransactionHeldPastItsLease: server 1's handler records its
// answer with CompleteTx and then holds its transaction open past its
// lease (its renewal waits on the row lock the transaction holds, so the
// lease runs out unrenewed). Server 2 is then called with the key: its
// claim sees the lease ended and its takeover waits on that same row lock.
// Either server 1's transaction is bound to the handler's context, which
// the interceptor cancels when the lease runs out, so database/sql rolls
// it back, and server 2 takes the key over and charges once while server
// 1's handler still waits; or it is not (a handler that began it on
// another context) and commits late, and then server 2's takeover finds
// the key completed and replays server 1's charge. Either way the ledger holds exactly one charge, and every later
// call replays it.
func TestMySQLTransactionHeldPastItsLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		detached bool // server 1 begins its transaction on a context the lease does not cancel
		winner   int64
	}{
		{"rolled back with the handler's context", false, 2},
		{"committed late on another context", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const lease = 600 * time.Millisecond
			l := newMyLedger(t)
			holding, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			held := func(first *myServer) testserver.HandlerFunc {
				return func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
					txCtx := ctx
					if tc.detached {
						txCtx = context.WithoutCancel(ctx)
					}
					tx, err := first.db.BeginTx(txCtx, nil)
					if err != nil {
						return nil, status.Error(codes.Unavailable, err.Error())
					}
					defer func() { _ = tx.Rollback() }()
					if _, err := tx.ExecContext(txCtx, "INSERT INTO "+l.ledger()+" (payload, server) VALUES (?, 1)", req.GetPayload()); err != nil {
						return nil, status.Error(codes.Unavailable, err.Error())
					}
					resp := &testingv1.DoResponse{Payload: req.GetPayload(), Amount: 1}
					if err := first.store.CompleteTx(ctx, tx, resp); err != nil {
						return nil, status.Error(codes.Unavailable, err.Error())
					}
					close(holding)
					<-release // past the lease, with the row locked
					if err := tx.Commit(); err != nil {
						return nil, status.Error(codes.Unavailable, "commit: "+err.Error())
					}
					return resp, nil
				}
			}
			first := l.server(t, myServerConfig{id: 1, handler: held, client: []idempotency.ClientOption{idempotency.WithoutRetry()},
				opts: []idempotency.ServerOption{idempotency.WithLease(lease)}})
			second := l.server(t, myServerConfig{id: 2})
			ctx := withKey(t.Context(), "k-held")
			req := &testingv1.DoRequest{Payload: "held"}
			firstErr := make(chan error, 1)
			go func() {
				_, err := first.client.Do(ctx, req)
				firstErr <- err
			}()
			<-holding
			time.Sleep(lease + 100*time.Millisecond) // the lease ends while the row is locked
			secondDone := make(chan error, 1)
			go func() {
				_, err := second.client.Do(ctx, req)
				secondDone <- err
			}()
			if tc.detached {
				// Server 2's takeover waits for server 1's transaction.
				once.Do(func() { close(release) })
			}
			// Without detaching, server 1's handler context was cancelled
			// when its lease ran out unrenewed, database/sql rolled its
			// transaction back, and server 2's takeover went through while
			// server 1's handler still waits.
			if err := <-secondDone; err != nil {
				t.Fatalf("server 2's call: %v", err)
			}
			once.Do(func() { close(release) })
			if err := <-firstErr; (err == nil) != tc.detached {
				t.Fatalf("server 1's call: %v; want an answer only when its transaction committed", err)
			}
			if n := l.rows(t, "held"); n != 1 {
				t.Fatalf("the ledger holds %d charges, want exactly 1", n)
			}
			var server int64
			if err := l.admin.QueryRowContext(t.Context(), "SELECT server FROM "+l.ledger()).Scan(&server); err != nil || server != tc.winner {
				t.Fatalf("the charge is server %d's (%v), want server %d's", server, err, tc.winner)
			}
			for _, s := range []*myServer{first, second} {
				var header metadata.MD
				resp, err := s.client.Do(ctx, req, grpc.Header(&header))
				if err != nil || resp.GetAmount() != tc.winner || !replayedMD(header) {
					t.Fatalf("later call on server %d: %v, %v; want server %d's charge, replayed", s.id, resp, err, tc.winner)
				}
			}
		})
	}
}
