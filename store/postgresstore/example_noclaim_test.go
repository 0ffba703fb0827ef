package postgresstore_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestExampleCommitsWithoutClaim: under WithFailOpen, Do runs its function
// without a claim while the store is down, and CompleteTx and
// CompleteErrorTx return idempotency.ErrNoClaim. The example's Charge (and
// its decline) then commit their ledger rows without a record; they used
// to take ErrNoClaim for a lost claim and roll back every such call with
// UNAVAILABLE.
func TestExampleCommitsWithoutClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := pgtest.Config(t, 4)
	cfg.ConnConfig.RuntimeParams["search_path"] = newSchema(t, pgtest.Pool(t, 1))
	db := pgtest.PoolFrom(t, cfg)
	s := postgresstore.New(db)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := createLedger(ctx, db); err != nil {
		t.Fatal(err)
	}
	// The server's store is down: every connection to it fails.
	downCfg := cfg.Copy()
	downCfg.ConnConfig.DialFunc = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("connection refused")
	}
	downPool, err := pgxpool.NewWithConfig(ctx, downCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(downPool.Close)
	down := postgresstore.New(downPool)
	t.Cleanup(func() { _ = down.Close() })
	idem := idempotency.NewServer(down, idempotency.WithFailOpen())
	p := &payments{db: db, store: s}

	for _, c := range []struct {
		name   string
		amount int64
		code   codes.Code
	}{
		{"charge", 1999, codes.OK},
		{"decline", 250_000, codes.FailedPrecondition},
	} {
		_, _, err := idempotency.Do(ctx, idem, "payments.charge", "order-"+c.name, wrapperspb.Int64(c.amount),
			func(ctx context.Context) (*wrapperspb.StringValue, error) { return p.Charge(ctx, "alice", c.amount) })
		if status.Code(err) != c.code {
			t.Fatalf("%s with the store down: %v, want %s", c.name, err, c.code)
		}
	}
	var charges, declines, records int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM charges), (SELECT count(*) FROM declines),
		(SELECT count(*) FROM idempotency_records)`).Scan(&charges, &declines, &records); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || declines != 1 || records != 0 {
		t.Fatalf("ledger: %d charges, %d declines, %d records; want 1, 1 and no record", charges, declines, records)
	}
}
