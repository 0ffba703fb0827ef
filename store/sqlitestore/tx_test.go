package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/sqltxtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// ledgerDDL is the handler's own table, beside the store's in one file.
const ledgerDDL = "CREATE TABLE ledger (payload TEXT NOT NULL)"

// newLedgerStore returns a store on a fresh file with a ledger table.
func newLedgerStore(t *testing.T) (*sqlitestore.Store, *sql.DB) {
	t.Helper()
	s, db := newStore(t, sqlitestore.WithSweepInterval(0))
	if _, err := db.ExecContext(t.Context(), ledgerDDL); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func ledgerRows(t *testing.T, db *sql.DB, payload string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM ledger WHERE payload = ?", payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCompleteTxSuite runs the transactional-completion suite of the SQL
// stores (internal/test/sqltxtest) on a SQLite file: the handler's
// transaction and the store share it.
func TestCompleteTxSuite(t *testing.T) {
	t.Parallel()
	sqltxtest.Run(t, func(t *testing.T) sqltxtest.Rig {
		s, db := newLedgerStore(t)
		return sqltxtest.Rig{
			Store: s,
			Begin: func(ctx context.Context) (sqltxtest.Tx, error) {
				tx, err := db.BeginTx(ctx, nil)
				return &sqlTx{s: s, tx: tx}, err
			},
			LedgerRows: func(t *testing.T, payload string) int { return ledgerRows(t, db, payload) },
			ExpireAll: func(t *testing.T) {
				if _, err := db.ExecContext(t.Context(), "UPDATE "+sqlitestore.DefaultTable+" SET expires_at = 0, lease_until = NULL"); err != nil {
					t.Fatal(err)
				}
			},
			OneWriter: true,
		}
	})
}

// sqlTx is a handler's transaction as sqltxtest drives it.
type sqlTx struct {
	s  *sqlitestore.Store
	tx *sql.Tx
}

func (x *sqlTx) Charge(ctx context.Context, payload string) error {
	_, err := x.tx.ExecContext(ctx, "INSERT INTO ledger (payload) VALUES (?)", payload)
	return err
}

func (x *sqlTx) CompleteTx(ctx context.Context, resp proto.Message) error {
	return x.s.CompleteTx(ctx, x.tx, resp)
}

func (x *sqlTx) CompleteErrorTx(ctx context.Context, err error) error {
	return x.s.CompleteErrorTx(ctx, x.tx, err)
}

func (x *sqlTx) Commit(context.Context) error   { return x.tx.Commit() }
func (x *sqlTx) Rollback(context.Context) error { return x.tx.Rollback() }

func keyed(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

// TestDuplicateNotBlockedByTheTransaction: while the handler's transaction
// holds the write lock after CompleteTx, a duplicate of the call is
// answered at once: ABORTED, in use (its claim begins with a read, which
// sees the claim in flight), where a claim that wrote first would wait
// for the commit. After the commit, the duplicate's retry replays.
func TestDuplicateNotBlockedByTheTransaction(t *testing.T) {
	t.Parallel()
	s, db := newLedgerStore(t)
	recorded, commit := make(chan struct{}), make(chan struct{})
	srv := testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (payload) VALUES (?)", req.GetPayload()); err != nil {
			return nil, err
		}
		resp := &testingv1.DoResponse{Payload: req.GetPayload()}
		if err := s.CompleteTx(ctx, tx, resp); err != nil {
			return nil, err
		}
		close(recorded)
		<-commit
		return resp, tx.Commit()
	}}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(s)))
	client := srv.Client(t)
	ctx := keyed(t.Context(), "k")
	first := make(chan error, 1)
	go func() {
		_, err := client.Do(ctx, &testingv1.DoRequest{Payload: "held"})
		first <- err
	}()
	<-recorded
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := client.Do(dctx, &testingv1.DoRequest{Payload: "held"})
	cancel()
	testkit.WantReason(t, err, codes.Aborted, "IDEMPOTENCY_KEY_IN_USE")
	close(commit)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var header metadata.MD
	if _, err := client.Do(ctx, &testingv1.DoRequest{Payload: "held"}, grpc.Header(&header)); err != nil || !slices.Contains(header.Get(idempotency.ReplayedKey), "true") {
		t.Fatalf("retry after the commit: %v, replayed=%v", err, header.Get(idempotency.ReplayedKey))
	}
	if n := ledgerRows(t, db, "held"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
}

// TestCompleteTxElsewhere: CompleteTx in a transaction on another database
// file, which holds a table of the same name, is not told that the lease
// was lost: the claim is still there, and the error names both files. A
// lease really lost is still ErrLeaseLost.
func TestCompleteTxElsewhere(t *testing.T) {
	t.Parallel()
	s, _ := newLedgerStore(t)
	other, _ := openDB(t)
	newStoreOn(t, other, sqlitestore.WithSweepInterval(0))
	for _, tc := range []struct {
		name string
		db   func(t *testing.T) *sql.DB
		lose bool
		want string
	}{
		{"another file", func(*testing.T) *sql.DB { return other }, false, "the transaction runs on database file"},
		{"lease lost", func(*testing.T) *sql.DB { return other }, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got error
			srv := testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if tc.lose {
					c, _ := idempotency.ClaimFromContext(ctx)
					if _, err := s.Purge(ctx, c.StoreKey, store.PurgeOptions{InFlight: true}); err != nil {
						return nil, err
					}
				}
				tx, err := tc.db(t).BeginTx(ctx, nil)
				if err != nil {
					return nil, err
				}
				defer func() { _ = tx.Rollback() }()
				got = s.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: req.GetPayload()})
				return nil, got
			}}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(s)))
			if _, err := srv.Client(t).Do(keyed(t.Context(), strings.ReplaceAll(tc.name, " ", "-")), &testingv1.DoRequest{Payload: "p"}); err == nil {
				t.Fatal("the call succeeded without its outcome recorded")
			}
			switch {
			case tc.want == "" && !errors.Is(got, store.ErrLeaseLost):
				t.Fatalf("CompleteTx: %v, want ErrLeaseLost", got)
			case tc.want != "" && (errors.Is(got, store.ErrLeaseLost) || got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("CompleteTx: %v, want an error with %q", got, tc.want)
			}
		})
	}
}
