package mysqlstore_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// TestClaimReplyLost: a claim whose INSERT (a new key) or takeover UPDATE
// (an expired key) committed but whose answer was lost (the connection cut
// on the way back) fails, and releases the claim it made, so the key is
// free at once instead of blocked for the whole lease by a claim nobody
// owns. A take-over of an abandoned key whose answer was lost leaves the
// key abandoned, as it was, rather than free for a run that would not know
// about the abandoned attempt.
func TestClaimReplyLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		write     string // the statement whose reply is cut
		expired   bool   // the key holds an expired claim first
		abandoned bool   // the key holds an abandoned claim first, which the claim takes over
	}{
		{"insert", "INSERT INTO", false, false},
		{"takeover", "UPDATE", true, false},
		{"take-over of an abandoned claim", "UPDATE", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			direct, db := newStore(t, 2, mysqlstore.WithSweepInterval(0))
			cfg := mysqltest.Config(t)
			p, err := faultproxy.New(cfg.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			cfg.Addr = p.Addr()
			var armed atomic.Bool
			trips := &mysqltest.RoundTrips{Match: tableOf(t, direct), OnCommand: func(c mysqltest.Command) {
				if c.Kind == "execute" && strings.HasPrefix(c.SQL, tc.write) && p.ArmedCuts() == 0 && armed.Load() {
					armed.Store(false)
					p.CutNextReply(1)
				}
			}}
			trips.Install(cfg)
			proxied := mysqlstore.New(mysqltest.DBFrom(t, cfg, 1), mysqlstore.WithTable(tableOf(t, direct)), mysqlstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = proxied.Close() })
			if tc.expired {
				if _, err := direct.Claim(t.Context(), "k", []byte("dead server"), time.Millisecond, store.ClaimOptions{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			opts := store.ClaimOptions{}
			if tc.abandoned {
				c, err := direct.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour})
				if err == nil {
					err = direct.Abandon(t.Context(), "k", c.Token)
				}
				if err != nil {
					t.Fatal(err)
				}
				opts = store.ClaimOptions{Keep: time.Hour, TakeOver: true}
			}
			armed.Store(true)
			if _, err := proxied.Claim(t.Context(), "k", []byte("fp"), time.Hour, opts); err == nil {
				t.Fatal("Claim succeeded though its answer was lost")
			}
			if p.Cuts() != 1 {
				t.Fatalf("%d cuts, want the claim's answer cut", p.Cuts())
			}
			if tc.abandoned {
				info, err := direct.Lookup(t.Context(), "k")
				if err != nil || info.State != store.StateAbandoned || info.Attempt != 2 {
					t.Fatalf("key after the failed take-over: %+v, %v, want it abandoned by attempt 2", info, err)
				}
				return
			}
			var rows int
			if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+tableOf(t, direct)+" WHERE `key` = 'k' AND expires_at > UTC_TIMESTAMP(6)").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			c, err := direct.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{})
			if err != nil || !c.Won() {
				t.Fatalf("key after the failed claim: won=%v err=%v (%d live rows), want it free", c.Won(), err, rows)
			}
		})
	}
}
