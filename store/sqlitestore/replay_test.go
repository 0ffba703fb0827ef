package sqlitestore_test

import (
	"os"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// TestClaimLiveKeyWritesNothing: claims that find a live entry (replays
// of a completed key, duplicates of one in flight, of an abandoned one,
// and a take-over refused for another fingerprint) are reads: the
// write-ahead log, where every commit of a write lands, does not grow.
// The claim of a free key does grow it, so the measure can fail.
func TestClaimLiveKeyWritesNothing(t *testing.T) {
	t.Parallel()
	db, path := openDB(t)
	s := newStoreOn(t, db, sqlitestore.WithSweepInterval(0))
	ctx := t.Context()
	fp := []byte("fp")
	done, err := s.Claim(ctx, "done", fp, time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "done", done.Token, []byte("answer"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "running", fp, time.Hour, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	gone, err := s.Claim(ctx, "abandoned", fp, time.Hour, store.ClaimOptions{Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(ctx, "abandoned", gone.Token); err != nil {
		t.Fatal(err)
	}
	walSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := walSize()
	for range 50 {
		for _, c := range []struct {
			key   string
			fp    []byte
			opts  store.ClaimOptions
			state store.State
		}{
			{"done", fp, store.ClaimOptions{}, store.StateCompleted},
			{"running", fp, store.ClaimOptions{TakeOver: true, Keep: time.Hour}, store.StateInFlight},
			{"abandoned", fp, store.ClaimOptions{}, store.StateAbandoned},
			{"abandoned", []byte("other"), store.ClaimOptions{TakeOver: true, Keep: time.Hour}, store.StateAbandoned},
		} {
			r, err := s.Claim(ctx, c.key, c.fp, time.Minute, c.opts)
			if err != nil || r.Won() || r.Existing.State != c.state {
				t.Fatalf("claim of %s: %+v, %v; want it %v", c.key, r, err, c.state)
			}
		}
	}
	if after := walSize(); after != before {
		t.Fatalf("the log grew from %d to %d bytes over claims of live keys", before, after)
	}
	if _, err := s.Claim(ctx, "free", fp, time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := walSize(); after == before {
		t.Fatal("the log did not grow with the claim of a free key: the measure sees nothing")
	}
}
