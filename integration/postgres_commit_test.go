package idempotency_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// slowCommit makes the commit of a ledger row whose payload starts with
// "slow" take 500ms inside PostgreSQL (a deferred constraint trigger runs
// at COMMIT), so that a connection can be cut while the server commits.
const slowCommit = `
CREATE FUNCTION %[1]s.slow_commit() RETURNS trigger LANGUAGE plpgsql AS
	$$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON %[1]s.ledger
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	WHEN (NEW.payload LIKE 'slow%%') EXECUTE FUNCTION %[1]s.slow_commit()`

// TestPostgresCommitFaults is proof 1 of transactional completion: a
// handler inserts a ledger row and calls CompleteTx in one transaction, and
// its database connection (through a fault proxy) is cut before the
// commit, during it or after it, or the commit's answer is lost. The client
// retries with the same key (its interceptor retries UNAVAILABLE), then
// calls once more. In every case the ledger ends with exactly one charge,
// and every answer is the charge: the single execution's, or its replay.
func TestPostgresCommitFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		payload string // "slow..." makes the commit take 500ms
		hooks   func(fault func() bool) pgHooks
		// params are session settings of the handler's connections.
		params map[string]string
		// executions: 1 when the first commit landed, 2 when it did not.
		executions int64
	}{
		{
			name:    "cut before the commit",
			payload: "before",
			hooks: func(fault func() bool) pgHooks {
				return pgHooks{beforeCommit: func(_ context.Context, s *pgServer) {
					if fault() {
						s.proxy.CutAll()
					}
				}}
			},
			executions: 2,
		},
		{
			// pgx answers the broken connection with a cancel request on a
			// new connection, which reaches the server while it commits.
			name:    "cut during the commit, which pgx's cancel request aborts",
			payload: "slow-cancelled",
			hooks: func(fault func() bool) pgHooks {
				return pgHooks{beforeCommit: func(_ context.Context, s *pgServer) {
					if fault() {
						cutDuring(s, false)
					}
				}}
			},
			executions: 2,
		},
		{
			// The network is down for new connections too: the cancel
			// request never arrives, and the server commits and only
			// fails to send the answer.
			name:    "cut during the commit, which the server finishes",
			payload: "slow-finished",
			hooks: func(fault func() bool) pgHooks {
				return pgHooks{beforeCommit: func(_ context.Context, s *pgServer) {
					if fault() {
						cutDuring(s, true)
					}
				}}
			},
			executions: 1,
		},
		{
			// The network is down, and client_connection_check_interval
			// lets the server notice the lost client during the commit's
			// trigger, and abort.
			name:    "cut during the commit, which the server aborts",
			payload: "slow-aborted",
			params:  map[string]string{"client_connection_check_interval": "10ms"},
			hooks: func(fault func() bool) pgHooks {
				return pgHooks{beforeCommit: func(_ context.Context, s *pgServer) {
					if fault() {
						cutDuring(s, true)
					}
				}}
			},
			executions: 2,
		},
		{
			name:    "cut after the commit",
			payload: "after",
			hooks: func(fault func() bool) pgHooks {
				return pgHooks{afterCommit: func(_ context.Context, s *pgServer) {
					if fault() {
						s.proxy.CutAll()
					}
				}}
			},
			executions: 1,
		},
		{
			name:    "answer to the commit lost",
			payload: "answer-lost",
			hooks: func(fault func() bool) pgHooks {
				return pgHooks{beforeCommit: func(_ context.Context, s *pgServer) {
					if fault() {
						s.proxy.CutNextReply(1)
					}
				}}
			},
			executions: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newPGLedger(t)
			if _, err := l.admin.Exec(t.Context(), fmt.Sprintf(slowCommit, l.schema)); err != nil {
				t.Fatal(err)
			}
			var faults atomic.Int64
			fault := func() bool { return faults.Add(1) == 1 } // the first execution only
			s := l.server(t, pgServerConfig{id: 1, proxied: true, maxConns: 1, params: tc.params, hooks: tc.hooks(fault),
				client: []idempotency.ClientOption{idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 50 * time.Millisecond })}})
			ctx := withKey(t.Context(), "k-"+tc.payload)
			req := &testingv1.DoRequest{Payload: tc.payload}
			for i := range 2 {
				var header, trailer metadata.MD
				resp, err := s.client.Do(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
				if err != nil || resp.GetPayload() != tc.payload {
					t.Fatalf("call %d: %v, %v; want the charge", i, resp, err)
				}
				if i == 1 && !slices.Contains(header.Get(idempotency.ReplayedKey), "true") {
					t.Fatal("the call after the charge was not a replay")
				}
			}
			if faults.Load() == 0 {
				t.Fatal("the fault never ran")
			}
			if n := s.srv.Service.Executions(); n != tc.executions {
				t.Fatalf("handler ran %d times, want %d", n, tc.executions)
			}
			if n := l.rows(t, tc.payload); n != 1 {
				t.Fatalf("the ledger holds %d charges, want exactly 1", n)
			}
		})
	}
}

// cutDuring cuts every connection of s's proxy 150ms from now, while the
// handler's slow commit runs in the server. With down, the proxy also
// holds every byte of every new connection (a network that is down) for
// a second, until the commit is over.
func cutDuring(s *pgServer, down bool) {
	time.AfterFunc(150*time.Millisecond, func() {
		if down {
			s.proxy.Stall()
			time.AfterFunc(time.Second, s.proxy.Resume)
		}
		s.proxy.CutAll()
	})
}
