package postgresstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// searchPathPool returns a pool of at most maxConns connections on the
// database of url (the package's when empty) whose search_path is schema.
func searchPathPool(t *testing.T, url, schema string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg := pgtest.Config(t, maxConns)
	if url != "" {
		var err error
		if cfg, err = pgxpool.ParseConfig(url); err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return pgtest.PoolFrom(t, cfg)
}

// migrated returns a migrated store on pool with its table "records",
// found through pool's search_path.
func migrated(t *testing.T, pool *pgxpool.Pool) *postgresstore.Store {
	t.Helper()
	s := postgresstore.New(pool, postgresstore.WithTable("records"), postgresstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCompleteTxElsewhere: CompleteTx in a transaction that cannot see the
// claim's row (it runs on another database, its search_path finds another
// table or none, or its snapshot was taken before the claim) is not told
// that the lease was lost: the claim is still there, and the error says
// what is wrong. A lease really lost is still ErrLeaseLost.
func TestCompleteTxElsewhere(t *testing.T) {
	t.Parallel()
	home := newSchema(t, pgtest.Pool(t, 1))
	storePool := searchPathPool(t, "", home, 8)
	s := migrated(t, storePool)
	srv := idempotency.NewServer(s)

	for _, tc := range []struct {
		name string
		// begin returns the handler's transaction, begun before the
		// call is claimed.
		begin func(t *testing.T) pgx.Tx
		// meanwhile runs inside the handler, before CompleteTx, with the
		// key the claim is stored under.
		meanwhile func(t *testing.T, storeKey string)
		want      string // in the error
		lost      bool   // the error is ErrLeaseLost
	}{
		{
			name: "another database",
			begin: func(t *testing.T) pgx.Tx {
				url := pgtest.NewDatabase(t)
				other := searchPathPool(t, url, home, 2)
				if _, err := other.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{home}.Sanitize()); err != nil {
					t.Fatal(err)
				}
				migrated(t, other)
				return begin(t, other, pgx.ReadCommitted)
			},
			want: "runs on database",
		},
		{
			name: "search_path finds another table",
			begin: func(t *testing.T) pgx.Tx {
				other := searchPathPool(t, "", newSchema(t, storePool), 2)
				migrated(t, other)
				return begin(t, other, pgx.ReadCommitted)
			},
			want: "finds another table",
		},
		{
			name: "search_path finds no table",
			begin: func(t *testing.T) pgx.Tx {
				return begin(t, searchPathPool(t, "", newSchema(t, storePool), 2), pgx.ReadCommitted)
			},
			want: "does not see the store's table",
		},
		{
			name: "snapshot before the claim",
			begin: func(t *testing.T) pgx.Tx {
				tx := begin(t, storePool, pgx.RepeatableRead)
				if _, err := tx.Exec(t.Context(), "SELECT count(*) FROM records"); err != nil {
					t.Fatal(err)
				}
				return tx
			},
			want: "before the claim",
		},
		{
			name:  "lease lost",
			begin: func(t *testing.T) pgx.Tx { return begin(t, storePool, pgx.ReadCommitted) },
			meanwhile: func(t *testing.T, storeKey string) {
				// Another owner took the key over.
				if _, err := storePool.Exec(t.Context(), "UPDATE records SET token = 'another owner' WHERE key = $1", []byte(storeKey)); err != nil {
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
				return nil, status.Error(codes.Unavailable, "rolled back")
			})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("Do = %v, want the function's UNAVAILABLE", err)
			}
			t.Logf("CompleteTx: %v", got)
			if errors.Is(got, store.ErrLeaseLost) != tc.lost || got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("CompleteTx = %v; want an error saying %q, matching ErrLeaseLost: %v", got, tc.want, tc.lost)
			}
		})
	}
}

// begin begins a transaction on pool at level, rolled back when t ends.
func begin(t *testing.T, pool *pgxpool.Pool, level pgx.TxIsoLevel) pgx.Tx {
	t.Helper()
	tx, err := pool.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: level})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// TestCompleteTxLeaseLostOnAFullPool: when the handler's transaction holds
// the last connection of the store's pool, CompleteTx of a lost claim
// cannot look at the store's table, and still returns ErrLeaseLost, within
// its bound, instead of waiting for a connection for ever.
func TestCompleteTxLeaseLostOnAFullPool(t *testing.T) {
	t.Parallel()
	home := newSchema(t, pgtest.Pool(t, 1))
	pool := searchPathPool(t, "", home, 1)
	other := searchPathPool(t, "", home, 1)
	s := migrated(t, pool)
	srv := idempotency.NewServer(s)
	var got error
	_, _, err := idempotency.Do(t.Context(), srv, "charge", "k", &testingv1.DoRequest{}, func(ctx context.Context) (*testingv1.DoResponse, error) {
		c, _ := idempotency.ClaimFromContext(ctx)
		if _, err := other.Exec(ctx, "UPDATE records SET token = 'another owner' WHERE key = $1", []byte(c.StoreKey)); err != nil {
			return nil, err
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		got = s.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: "p"})
		_ = tx.Rollback(ctx)
		return nil, status.Error(codes.Unavailable, "rolled back")
	})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Do = %v, want the function's UNAVAILABLE", err)
	}
	if !errors.Is(got, store.ErrLeaseLost) {
		t.Fatalf("CompleteTx of a lost claim on a full pool = %v, want ErrLeaseLost", got)
	}
}
