package postgresstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// TestPurgeAnswersFromTheRowItWaitedFor: a purge whose DELETE waited for
// a step that changed the key's row answers from the row that step left,
// never from the row as the purge's snapshot held it (decision 319). The
// interleaving is forced (behindALock): the purge queues behind the step,
// its snapshot holding the row as claimed, and the step changes the row
// before the purge's DELETE looks at it again.
//
// Without the fix, a purge fenced by the row's state (and, for the
// take-over, by its token) that a Complete or a take-over overtook was
// refused with store.ErrChanged and the Info of the row as it was before,
// in flight under its first owner: an answer that no order of the two
// calls explains (the purge would have deleted that row), which is what
// postgresstore's TestLinearizability once reported.
func TestPurgeAnswersFromTheRowItWaitedFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// step changes the row claimed by token; it returns the token of
		// the row it leaves ("" for none).
		step func(ctx context.Context, s store.Store, token string) (string, error)
		// keep claims with a keep and abandons the claim first; fenced
		// fences the purge by the claim's token.
		keep, fenced bool
		// want checks the purge's answer.
		want func(t *testing.T, info store.Info, err error, token, after string)
	}{
		{
			name: "complete",
			step: func(ctx context.Context, s store.Store, token string) (string, error) {
				return token, s.Complete(ctx, "k", token, []byte("outcome"), time.Hour)
			},
			want: func(t *testing.T, info store.Info, err error, token, _ string) {
				if !errors.Is(err, store.ErrChanged) || info.State != store.StateCompleted || info.Token != token || string(info.Data) != "outcome" {
					t.Fatalf("Purge = %+v, %v; want store.ErrChanged with the completed entry", info, err)
				}
			},
		},
		{
			name: "complete, fenced",
			step: func(ctx context.Context, s store.Store, token string) (string, error) {
				return token, s.Complete(ctx, "k", token, []byte("outcome"), time.Hour)
			},
			fenced: true,
			want: func(t *testing.T, info store.Info, err error, token, _ string) {
				if !errors.Is(err, store.ErrChanged) || info.State != store.StateCompleted || info.Token != token {
					t.Fatalf("Purge = %+v, %v; want store.ErrChanged with the completed entry", info, err)
				}
			},
		},
		{
			name: "take-over, fenced",
			step: func(ctx context.Context, s store.Store, _ string) (string, error) {
				c, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
				if err == nil && !c.Won() {
					err = errors.New("the take-over lost")
				}
				return c.Token, err
			},
			keep: true, fenced: true,
			want: func(t *testing.T, info store.Info, err error, _, after string) {
				if !errors.Is(err, store.ErrChanged) || info.State != store.StateInFlight || info.Token != after {
					t.Fatalf("Purge = %+v, %v; want store.ErrChanged with the entry of the take-over", info, err)
				}
			},
		},
		{
			name: "duplicate claim",
			step: func(ctx context.Context, s store.Store, token string) (string, error) {
				_, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, store.ClaimOptions{})
				return token, err
			},
			want: func(t *testing.T, info store.Info, err error, token, _ string) {
				if err != nil || info.Token != token {
					t.Fatalf("Purge = %+v, %v; want the claim's entry purged", info, err)
				}
			},
		},
		{
			name: "release",
			step: func(ctx context.Context, s store.Store, token string) (string, error) {
				return "", s.Release(ctx, "k", token)
			},
			want: func(t *testing.T, info store.Info, err error, _, _ string) {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("Purge = %+v, %v; want store.ErrNotFound", info, err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pool := newStore(t, 6)
			ctx := t.Context()
			opts := store.ClaimOptions{}
			if tc.keep {
				opts.Keep = time.Hour
			}
			c, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, opts)
			if err != nil || !c.Won() {
				t.Fatalf("Claim = %+v, %v", c, err)
			}
			if tc.keep {
				if err := s.Abandon(ctx, "k", c.Token); err != nil {
					t.Fatal(err)
				}
			}
			var (
				left              string
				info              store.Info
				stepErr, purgeErr error
			)
			behindALock(t, s, pool, func(ctx context.Context) {
				left, stepErr = tc.step(ctx, s, c.Token)
			}, func(ctx context.Context) {
				popts := store.PurgeOptions{InFlight: true}
				if tc.fenced {
					popts.Token = c.Token
				}
				info, purgeErr = s.Purge(ctx, "k", popts)
			})
			if stepErr != nil {
				t.Fatalf("the step: %v", stepErr)
			}
			tc.want(t, info, purgeErr, c.Token, left)
		})
	}
}

// TestReleaseAnswersFromTheRowItWaitedFor: a Release whose DELETE waited
// for a step that deleted the key's row (a purge, a release resent with
// the same token, an abandon of a claim without a keep) finds nothing
// left to release and returns nil, as the contract says; it used to
// return store.ErrLeaseLost, having looked for a live row on the
// statement's snapshot, which still held the deleted row. A Release that
// a completion or a take-over overtook still returns store.ErrLeaseLost.
// The interleaving is forced as in TestPurgeAnswersFromTheRowItWaitedFor.
func TestReleaseAnswersFromTheRowItWaitedFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		keep bool
		// step changes the row claimed by token.
		step func(ctx context.Context, s *postgresstore.Store, token string) error
		want error
	}{
		{"purged", false, func(ctx context.Context, s *postgresstore.Store, _ string) error {
			_, err := s.Purge(ctx, "k", store.PurgeOptions{InFlight: true})
			return err
		}, nil},
		{"released", false, func(ctx context.Context, s *postgresstore.Store, token string) error {
			return s.Release(ctx, "k", token)
		}, nil},
		{"abandoned without a keep", false, func(ctx context.Context, s *postgresstore.Store, token string) error {
			return s.Abandon(ctx, "k", token)
		}, nil},
		{"completed", false, func(ctx context.Context, s *postgresstore.Store, token string) error {
			return s.Complete(ctx, "k", token, []byte("outcome"), time.Hour)
		}, store.ErrLeaseLost},
		{"taken over", true, func(ctx context.Context, s *postgresstore.Store, _ string) error {
			c, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
			if err == nil && !c.Won() {
				err = errors.New("the take-over lost")
			}
			return err
		}, store.ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pool := newStore(t, 6)
			ctx := t.Context()
			opts := store.ClaimOptions{}
			if tc.keep {
				opts.Keep = time.Hour
			}
			c, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, opts)
			if err != nil || !c.Won() {
				t.Fatalf("Claim = %+v, %v", c, err)
			}
			if tc.keep {
				if err := s.Abandon(ctx, "k", c.Token); err != nil {
					t.Fatal(err)
				}
			}
			var stepErr, releaseErr error
			behindALock(t, s, pool, func(ctx context.Context) {
				stepErr = tc.step(ctx, s, c.Token)
			}, func(ctx context.Context) {
				releaseErr = s.Release(ctx, "k", c.Token)
			})
			if stepErr != nil {
				t.Fatalf("the step: %v", stepErr)
			}
			if !errors.Is(releaseErr, tc.want) || (tc.want == nil && releaseErr != nil) {
				t.Fatalf("Release = %v, want %v", releaseErr, tc.want)
			}
		})
	}
}

// behindALock runs first and second, each in a goroutine of its own, on
// the key "k" of s: a transaction takes the row's lock, first is started
// and waits for it, second is started and waits behind first (its
// statement's snapshot still holds the row as it was), and the
// transaction then commits, so that first changes the row before second
// looks at it again. It returns once both have returned. Each wait is
// seen in pg_stat_activity, not slept.
func behindALock(t *testing.T, s *postgresstore.Store, pool *pgxpool.Pool, first, second func(context.Context)) {
	t.Helper()
	ctx := t.Context()
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.WithoutCancel(ctx)) }()
	table := tableOf(t, s)
	if _, err := hold.Exec(ctx, "SELECT 1 FROM "+table+" WHERE key = $1 FOR NO KEY UPDATE", []byte("k")); err != nil {
		t.Fatal(err)
	}
	schema, _, _ := strings.Cut(table, ".")
	var wg sync.WaitGroup
	wg.Go(func() { first(ctx) })
	waitForLockWaiters(t, pool, schema, 1)
	wg.Go(func() { second(ctx) })
	waitForLockWaiters(t, pool, schema, 2)
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// waitForLockWaiters returns once n backends whose statements name the
// schema wait for a lock, failing t after 10 seconds.
func waitForLockWaiters(t *testing.T, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		var waiting int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, `"`+schema+`"`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d statements on %s wait for a lock, want %d", waiting, schema, n)
		}
	}
}
