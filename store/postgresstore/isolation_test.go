package postgresstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// stricter are the default isolations stricter than READ COMMITTED.
var stricter = []string{"repeatable read", "serializable"}

// strictPool returns a pool of at most maxConns connections on the
// package's database whose transactions default to level.
func strictPool(t *testing.T, maxConns int32, level string) *pgxpool.Pool {
	t.Helper()
	cfg := pgtest.Config(t, maxConns)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = level
	return pgtest.PoolFrom(t, cfg)
}

// TestStepsUnderStricterDefaultIsolation: on connections whose default
// isolation is REPEATABLE READ or SERIALIZABLE, each step that meets a row
// changed after its statement began (an in-flight duplicate's claim
// rewrote it and committed while the step waited for its row lock)
// answers as under READ COMMITTED, whether the store learnt the isolation
// from Migrate or from a first serialization failure. Under those
// isolations alone, each of these steps fails with a serialization error.
func TestStepsUnderStricterDefaultIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range stricter {
		for _, migrate := range []bool{true, false} {
			for _, op := range []string{"claim", "complete", "extend", "release"} {
				t.Run(fmt.Sprintf("%s/migrate=%v/%s", level, migrate, op), func(t *testing.T) {
					t.Parallel()
					ctx := t.Context()
					rc, rcPool := newStore(t, 2, postgresstore.WithSweepInterval(0))
					pool := strictPool(t, 2, level)
					s := postgresstore.New(pool, postgresstore.WithTable(tableOf(t, rc)), postgresstore.WithSweepInterval(0))
					t.Cleanup(func() { _ = s.Close() })
					if migrate {
						if err := s.Migrate(ctx); err != nil {
							t.Fatal(err)
						}
					}
					owner, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, store.ClaimOptions{})
					if err != nil || !owner.Won() {
						t.Fatalf("claim: %+v, %v", owner, err)
					}

					// An in-flight duplicate's claim rewrites the row and
					// holds it.
					dup, err := rcPool.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = dup.Rollback(context.WithoutCancel(ctx)) }()
					sql, args := postgresstore.ClaimSQL(s, "k", "duplicate", "fp", time.Hour)
					if _, err := dup.Exec(ctx, sql, args...); err != nil {
						t.Fatal(err)
					}
					done := make(chan error, 1)
					go func() {
						switch op {
						case "claim":
							c, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, store.ClaimOptions{})
							if err == nil && (c.Won() || c.Existing.State != store.StateInFlight) {
								err = fmt.Errorf("claim of a key in flight = %+v, want it in flight", c)
							}
							done <- err
						case "complete":
							done <- s.Complete(ctx, "k", owner.Token, []byte("outcome"), time.Hour)
						case "extend":
							done <- s.Extend(ctx, "k", owner.Token, time.Hour)
						case "release":
							done <- s.Release(ctx, "k", owner.Token)
						}
					}()
					waitForLockWaiter(t, rcPool, dup)
					if err := dup.Commit(ctx); err != nil {
						t.Fatal(err)
					}
					if err := <-done; err != nil {
						t.Fatalf("%s under %s after a duplicate's claim: %v", op, level, err)
					}
					// The store's own transactions left the connections'
					// default as it was.
					for range 2 {
						var got string
						if err := pool.QueryRow(ctx, "SELECT current_setting('transaction_isolation')").Scan(&got); err != nil || got != level {
							t.Fatalf("a statement on the store's pool runs under %q (%v), want the pool's %q", got, err, level)
						}
					}
				})
			}
		}
	}
}

// TestStricterDefaultIsolationStorm: a storm of duplicates (eight callers
// per key, over four stores, each on a pool of its own) on a database
// whose default isolation is SERIALIZABLE or REPEATABLE READ (ALTER
// DATABASE), or on pools that ask for SERIALIZABLE (RuntimeParams). Every
// caller claims until the key is completed; the winner extends its lease
// three times and completes. Two stores ran Migrate, two did not. No step
// fails, and each key runs once.
func TestStricterDefaultIsolationStorm(t *testing.T) {
	t.Parallel()
	const (
		keys    = 16
		callers = 8
		stores  = 4
	)
	for _, tc := range []struct {
		name     string
		database string // the database's default isolation
		pool     string // the pools' default isolation
	}{
		{"database serializable", "serializable", ""},
		{"database repeatable read", "repeatable read", ""},
		{"pool serializable", "", "serializable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var settings []string
			if tc.database != "" {
				settings = append(settings, "default_transaction_isolation = '"+tc.database+"'")
			}
			url := pgtest.NewDatabase(t, settings...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			sts := make([]*postgresstore.Store, stores)
			for i := range sts {
				cfg, err := pgxpool.ParseConfig(url)
				if err != nil {
					t.Fatal(err)
				}
				cfg.MaxConns = 4
				if tc.pool != "" {
					cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = tc.pool
				}
				pool := pgtest.PoolFrom(t, cfg)
				var level string
				if err := pool.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&level); err != nil {
					t.Fatal(err)
				}
				if level != tc.database+tc.pool {
					t.Fatalf("default isolation %q, want %q", level, tc.database+tc.pool)
				}
				sts[i] = postgresstore.New(pool, postgresstore.WithSweepInterval(0))
				t.Cleanup(func() { _ = sts[i].Close() })
				if i < 2 {
					if err := sts[i].Migrate(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}

			var (
				runs  [keys]atomic.Int32
				errMu sync.Mutex
				errs  []error
			)
			fail := func(err error) {
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return // stopped by the first failure
				}
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
				cancel() // every caller stops
			}
			var wg sync.WaitGroup
			for k := range keys {
				key, fp := fmt.Sprintf("key-%d", k), []byte(fmt.Sprintf("fp-%d", k))
				for c := range callers {
					s := sts[(k+c)%stores]
					wg.Go(func() {
						for ctx.Err() == nil {
							cl, err := s.Claim(ctx, key, fp, time.Minute, store.ClaimOptions{})
							switch {
							case err != nil:
								fail(fmt.Errorf("claim %s: %w", key, err))
								return
							case cl.Won():
								runs[k].Add(1)
								for range 3 {
									if err := s.Extend(ctx, key, cl.Token, time.Minute); err != nil {
										fail(fmt.Errorf("extend %s: %w", key, err))
										return
									}
								}
								if err := s.Complete(ctx, key, cl.Token, []byte("done "+key), time.Hour); err != nil {
									fail(fmt.Errorf("complete %s: %w", key, err))
								}
								return
							case cl.Existing.State == store.StateCompleted:
								if string(cl.Existing.Data) != "done "+key {
									fail(fmt.Errorf("%s replayed %q", key, cl.Existing.Data))
								}
								return
							}
							// In flight: a duplicate claims again.
						}
					})
				}
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d steps failed under a stricter default isolation, the first: %v", len(errs), errs[0])
			}
			for k := range runs {
				if n := runs[k].Load(); n != 1 {
					t.Fatalf("key-%d ran %d times, want once", k, n)
				}
			}
		})
	}
}

// TestCompleteTxSerializationFailure: a handler whose transaction is
// REPEATABLE READ or SERIALIZABLE, and whose key's row changed after the
// transaction's snapshot (a duplicate of the call claimed it while the
// handler ran), gets a serialization failure from CompleteTx, not a lost
// lease. Treated as a failed commit (roll back, return a retryable error),
// it leaves nothing behind: the interceptor releases the claim, the retry
// runs the handler again and commits, and the ledger holds one row.
func TestCompleteTxSerializationFailure(t *testing.T) {
	t.Parallel()
	for _, level := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(level), func(t *testing.T) {
			t.Parallel()
			var (
				attempts atomic.Int32
				dupErr   = make(chan error, 1)
				txErrs   = make(chan error, 2)
			)
			f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				tx, err := f.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
				if err != nil {
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
				if _, err := tx.Exec(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES ($1)", req.GetPayload()); err != nil {
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				if attempts.Add(1) == 1 {
					// A duplicate arrives: its claim rewrites the row in
					// flight, after this transaction's snapshot.
					_, err := f.client.Do(keyed(t.Context(), "k"), req)
					dupErr <- err
				}
				resp := &testingv1.DoResponse{Payload: req.GetPayload()}
				err = f.store.CompleteTx(ctx, tx, resp)
				txErrs <- err
				if err != nil {
					// A failed commit: nothing is recorded, retry.
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				if err := tx.Commit(ctx); err != nil {
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				return resp, nil
			})
			ctx := keyed(t.Context(), "k")
			if _, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"}); status.Code(err) != codes.Unavailable {
				t.Fatalf("first call: %v, want UNAVAILABLE", err)
			}
			if err := <-dupErr; status.Code(err) != codes.Aborted {
				t.Fatalf("duplicate while the first ran: %v, want ABORTED (in use)", err)
			}
			err := <-txErrs
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "40001" || errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("CompleteTx after the row changed under %s: %v; want a serialization failure (40001), not a lost lease", level, err)
			}
			if n := f.calls.Count("release"); n != 1 {
				t.Fatalf("%d releases after the failed transaction, want 1", n)
			}
			if resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"}); err != nil || resp.GetPayload() != "p" {
				t.Fatalf("retry: %v, %v", resp, err)
			}
			if err := <-txErrs; err != nil {
				t.Fatalf("CompleteTx on the retry: %v", err)
			}
			if _, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"}); err != nil {
				t.Fatalf("replay: %v", err)
			}
			if n := f.srv.Service.Executions(); n != 2 {
				t.Fatalf("%d executions, want 2 (the failed transaction and its retry)", n)
			}
			if n := f.ledgerRows(t, "p"); n != 1 {
				t.Fatalf("%d ledger rows, want 1", n)
			}
		})
	}
}
