package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// TestMySQLStatementsPerCall counts on the wire, through the interceptor
// on a gRPC server, the round trips a call makes to the store's table
// once the pool's connection has prepared the statements: an executed
// call three (the SELECT, the INSERT, then the complete; or CompleteTx
// inside the handler's transaction, with no store call after the
// handler), a replay one (the SELECT, which found the completed key). A
// handler whose transaction comes from another pool than the store's
// records its outcome all the same, at the cost of one round trip more
// (the store's prepared statement cannot run there, so CompleteTx is
// prepared and run each time), or none when that pool interpolates
// parameters.
func TestMySQLStatementsPerCall(t *testing.T) {
	t.Parallel()
	echo := func(_ context.Context, _ *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
	}
	for _, tc := range []struct {
		name      string
		handler   txHandler
		otherPool bool // the handler's transactions come from a pool of their own
		interp    bool // which interpolates parameters
		completes int  // the interceptor's Complete calls after the handler, per executed call
		executed  int64
	}{
		{"complete", echo, false, false, 1, 3},
		{"complete in transaction", charge, false, false, 0, 3},
		{"complete in a transaction of another pool", charge, true, false, 0, 4},
		{"complete in a transaction of another pool that interpolates", charge, true, true, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			table := newTableName()
			trips := &mysqltest.RoundTrips{Match: "`" + table + "`"}
			cfg := mysqltest.Config(t)
			trips.Install(cfg)
			s, db := newStoreOn(t, mysqltest.DBFrom(t, cfg, 1), table, mysqlstore.WithSweepInterval(0))
			handlerDB := db
			if tc.otherPool {
				cfg := mysqltest.Config(t)
				cfg.InterpolateParams = tc.interp
				trips.Install(cfg)
				handlerDB = mysqltest.DBFrom(t, cfg, 1)
			}
			f := newTxFixtureOn(t, s, handlerDB, tc.handler)
			call := func(key string) {
				t.Helper()
				resp, err := f.client.Do(keyed(t.Context(), key), &testingv1.DoRequest{Payload: "p"})
				if err != nil || resp.GetPayload() != "p" {
					t.Fatalf("call with %s: %v, %v", key, resp, err)
				}
			}
			// Warm up: each statement prepared on the connection.
			for i := range 3 {
				call(fmt.Sprint("warm-", i))
				call(fmt.Sprint("warm-", i))
			}
			for i := range 3 {
				key := fmt.Sprint("k-", i)
				for _, want := range []int64{tc.executed, 1, 1} {
					trips.Reset()
					call(key)
					if got := trips.Count(); got != want {
						t.Fatalf("call with %s made %d round trips to %s (%v), want %d", key, got, table, sent(s, trips), want)
					}
				}
			}
			if c, r := f.calls.Count("complete"), f.calls.Count("release"); c != 6*tc.completes || r != 0 {
				t.Fatalf("the interceptor made %d Complete and %d Release calls after the handler, want %d and 0", c, r, 6*tc.completes)
			}
			if n := f.ledgerRows(t, "p"); tc.completes == 0 && n != 6 {
				t.Fatalf("%d ledger rows, want one per executed call, 6", n)
			}
		})
	}
}
