package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// TestCompleteTxElsewhere: CompleteTx in a transaction that cannot see the
// claim's row (it runs on another database, which holds a table of the
// same name or none) is not told that the lease was lost: the claim is
// still there, and the error says what is wrong. A lease really lost is
// still ErrLeaseLost. A REPEATABLE READ transaction whose snapshot was
// taken before the claim does see it (CompleteTx's UPDATE is a locking
// read of the newest version) and records the outcome.
func TestCompleteTxElsewhere(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 8, mysqlstore.WithSweepInterval(0))
	table := tableOf(t, s)
	srv := idempotency.NewServer(s)
	otherDB := func(t *testing.T, migrate bool) *sql.DB {
		t.Helper()
		cfg, err := mysql.ParseDSN(mysqltest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		other := mysqltest.DBFrom(t, cfg, 2)
		if migrate {
			o := mysqlstore.New(other, mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0))
			defer o.Close()
			if err := o.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		return other
	}
	for _, tc := range []struct {
		name string
		// begin returns the handler's transaction, begun before the
		// call is claimed.
		begin func(t *testing.T) *sql.Tx
		// meanwhile runs inside the handler, before CompleteTx, with the
		// key the claim is stored under.
		meanwhile func(t *testing.T, storeKey string)
		want      string // in the error; "" for success
		lost      bool   // the error is ErrLeaseLost
	}{
		{
			name:  "another database with the table",
			begin: func(t *testing.T) *sql.Tx { return begin(t, otherDB(t, true), sql.LevelReadCommitted) },
			want:  "runs on database",
		},
		{
			name:  "another database without the table",
			begin: func(t *testing.T) *sql.Tx { return begin(t, otherDB(t, false), sql.LevelReadCommitted) },
			want:  "does not see the store's table",
		},
		{
			name: "snapshot before the claim",
			begin: func(t *testing.T) *sql.Tx {
				tx := begin(t, db, sql.LevelRepeatableRead)
				if _, err := tx.ExecContext(t.Context(), "SELECT COUNT(*) FROM "+table); err != nil {
					t.Fatal(err)
				}
				return tx
			},
		},
		{
			name:  "lease lost",
			begin: func(t *testing.T) *sql.Tx { return begin(t, db, sql.LevelReadCommitted) },
			meanwhile: func(t *testing.T, storeKey string) {
				// Another owner took the key over.
				if _, err := db.ExecContext(t.Context(), "UPDATE "+table+" SET token = 'another owner' WHERE `key` = ?", []byte(storeKey)); err != nil {
					t.Fatal(err)
				}
			},
			want: "lease",
			lost: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tx := tc.begin(t)
			key := strings.ReplaceAll(tc.name, " ", "-")
			var got error
			_, _, err := idempotency.Do(t.Context(), srv, "charge", key, &testingv1.DoRequest{}, func(ctx context.Context) (*testingv1.DoResponse, error) {
				if tc.meanwhile != nil {
					c, _ := idempotency.ClaimFromContext(ctx)
					tc.meanwhile(t, c.StoreKey)
				}
				got = s.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: "p"})
				if got == nil {
					return &testingv1.DoResponse{Payload: "p"}, tx.Commit()
				}
				return nil, status.Error(codes.Unavailable, "rolled back")
			})
			t.Logf("CompleteTx: %v", got)
			if tc.want == "" {
				if got != nil || err != nil {
					t.Fatalf("CompleteTx = %v, Do = %v; want the outcome recorded", got, err)
				}
				return
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("Do = %v, want the function's UNAVAILABLE", err)
			}
			if errors.Is(got, store.ErrLeaseLost) != tc.lost || got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("CompleteTx = %v; want an error saying %q, matching ErrLeaseLost: %v", got, tc.want, tc.lost)
			}
		})
	}
}

// begin begins a transaction on db at level, rolled back when t ends.
func begin(t *testing.T, db *sql.DB, level sql.IsolationLevel) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), &sql.TxOptions{Isolation: level})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// TestCompleteTxLeaseLostOnAFullPool: when the handler's transaction holds
// the last connection of the store's pool, CompleteTx of a lost claim
// cannot look at the store's table, and still returns ErrLeaseLost at
// once, instead of waiting for a connection.
func TestCompleteTxLeaseLostOnAFullPool(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 1, mysqlstore.WithSweepInterval(0))
	other := mysqltest.DB(t, 1)
	srv := idempotency.NewServer(s)
	var (
		got  error
		took time.Duration
	)
	_, _, err := idempotency.Do(t.Context(), srv, "charge", "k", &testingv1.DoRequest{}, func(ctx context.Context) (*testingv1.DoResponse, error) {
		c, _ := idempotency.ClaimFromContext(ctx)
		if _, err := other.ExecContext(ctx, "UPDATE "+tableOf(t, s)+" SET token = 'another owner' WHERE `key` = ?", []byte(c.StoreKey)); err != nil {
			return nil, err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		got = s.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: "p"})
		took = time.Since(start)
		_ = tx.Rollback()
		return nil, status.Error(codes.Unavailable, "rolled back")
	})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Do = %v, want the function's UNAVAILABLE", err)
	}
	if !errors.Is(got, store.ErrLeaseLost) || took > 400*time.Millisecond {
		t.Fatalf("CompleteTx of a lost claim on a full pool = %v after %v, want ErrLeaseLost at once", got, took)
	}
}
