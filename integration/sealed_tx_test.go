package idempotency_test

import (
	"bytes"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/adminhook"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// sealedTxBackend is two replicas of the payments service of the
// transactional proofs (postgres_helpers_test.go, mysql_helpers_test.go)
// over one store table: their handler writes a ledger row and records its
// answer with CompleteTx in one transaction.
type sealedTxBackend struct {
	store      store.Store
	raw        func(t *testing.T, storeKey string) [][]byte
	rows       func(t *testing.T, payload string) int
	clients    [2]testingv1.TestServiceClient
	executions [2]func() int64
}

// TestSealedCompleteTx: on PostgreSQL and MySQL, the outcome a handler
// records with CompleteTx in its own transaction (idempotency.NewTxOutcome)
// is sealed as the interceptor's own are: CompleteTx succeeds, the row
// names the primary key (SealedBy), neither Lookup's data nor the row's
// columns hold the answer or the unkeyed fingerprint, the server opens it
// to the answer for package admin (adminhook.OpenRecord), and a retry on a
// replica whose keyring has another primary and the writer's key among its
// older keys replays it, without running the handler or writing the ledger
// again.
func TestSealedCompleteTx(t *testing.T) {
	t.Parallel()
	k1, k2 := sealedKey("k1", 1), sealedKey("k2", 2)
	for name, start := range map[string]func(t *testing.T, completeErr chan<- error) sealedTxBackend{
		"postgres": func(t *testing.T, completeErr chan<- error) sealedTxBackend {
			l := newPGLedger(t)
			w := l.server(t, pgServerConfig{id: 1, hooks: pgHooks{completeErr: completeErr}, opts: []idempotency.ServerOption{sealedWith(k1, k2)}})
			r := l.server(t, pgServerConfig{id: 2, opts: []idempotency.ServerOption{sealedWith(k2, k1)}})
			return sealedTxBackend{store: w.store, raw: pgRaw(l.admin, l.records()), rows: l.rows,
				clients: [2]testingv1.TestServiceClient{w.client, r.client}, executions: [2]func() int64{w.srv.Service.Executions, r.srv.Service.Executions}}
		},
		"mysql": func(t *testing.T, completeErr chan<- error) sealedTxBackend {
			l := newMyLedger(t)
			w := l.server(t, myServerConfig{id: 1, hooks: myHooks{completeErr: completeErr}, opts: []idempotency.ServerOption{sealedWith(k1, k2)}})
			r := l.server(t, myServerConfig{id: 2, opts: []idempotency.ServerOption{sealedWith(k2, k1)}})
			return sealedTxBackend{store: w.store, raw: myRaw(l.admin, l.records()), rows: l.rows,
				clients: [2]testingv1.TestServiceClient{w.client, r.client}, executions: [2]func() int64{w.srv.Service.Executions, r.srv.Service.Executions}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			completeErr := make(chan error, 1)
			b := start(t, completeErr)
			const secret = "card-5555-4444-3333-1111 exp 04/29"
			req := &testingv1.DoRequest{Payload: secret}
			ctx := withKey(t.Context(), "k-tx")
			var header metadata.MD
			first, err := b.clients[0].Do(ctx, req, grpc.Header(&header))
			if err != nil || first.GetPayload() != secret || replayedMD(header) {
				t.Fatalf("charge: %v, %v, header %v; want the charge, not replayed", first, err, header)
			}
			if err := <-completeErr; err != nil {
				t.Fatalf("CompleteTx: %v", err)
			}

			opener := idempotency.NewServer(b.store, sealedWith(k1))
			t.Cleanup(func() { _ = opener.Close() })
			sk, err := opener.StoreKey(testingv1.TestService_Do_FullMethodName, "", "k-tx")
			if err != nil {
				t.Fatal(err)
			}
			info, err := b.store.(store.Inspector).Lookup(t.Context(), sk)
			if err != nil {
				t.Fatal(err)
			}
			if id, ok := idempotency.SealedBy(info.Data); !ok || id != "k1" {
				t.Errorf("SealedBy = %q, %v; want k1, true", id, ok)
			}
			unkeyed, err := idempotency.Fingerprint(testingv1.TestService_Do_FullMethodName, req)
			if err != nil {
				t.Fatal(err)
			}
			wantSealedFingerprint(t, "Lookup", info.Fingerprint, unkeyed, "k1")
			wantNoSealedSecret(t, "Lookup's data", info.Data, []string{secret})
			raw := b.raw(t, sk)
			for _, v := range raw {
				wantNoSealedSecret(t, "the row", v, []string{secret})
			}
			if !bytes.Equal(raw[1], info.Data) {
				t.Errorf("the row's data %x is not what Lookup returned, %x", raw[1], info.Data)
			}
			if rec, id, err := adminhook.OpenRecord(opener, t.Context(), sk, "", info.Data); err != nil || id != "k1" || !bytes.Contains(rec, []byte(secret)) {
				t.Errorf("OpenRecord = %d bytes, %q, %v; want the answer, sealed by k1", len(rec), id, err)
			}

			for i, c := range b.clients {
				var header metadata.MD
				again, err := c.Do(ctx, req, grpc.Header(&header))
				// The recorded answer is the handler's: the test service
				// numbers the live answer's execution after CompleteTx.
				want := &testingv1.DoResponse{Payload: secret, Amount: 1}
				if err != nil || !proto.Equal(again, want) || !replayedMD(header) {
					t.Fatalf("retry on replica %d: %v, %v, header %v; want %v, replayed", i+1, again, err, header, want)
				}
			}
			if n1, n2 := b.executions[0](), b.executions[1](); n1 != 1 || n2 != 0 {
				t.Errorf("the handlers ran %d and %d times, want 1 and 0", n1, n2)
			}
			if n := b.rows(t, secret); n != 1 {
				t.Errorf("the ledger holds %d charges, want 1", n)
			}
		})
	}
}
