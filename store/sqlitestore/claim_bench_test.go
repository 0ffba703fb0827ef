package sqlitestore_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// BenchmarkClaim measures the store's steps at 1 and 64 callers, with the
// in-process write gate and without it (every writer then waits for the
// write lock in SQLite's busy handler), at synchronous FULL and NORMAL:
// an executed call (a claim of a new key and its Complete) and a replay
// (a claim of a completed key).
//
//	go test -run '^$' -bench BenchmarkClaim -benchtime 2000x ./store/sqlitestore
func BenchmarkClaim(b *testing.B) {
	for _, sync := range []sqlitestore.Synchronous{sqlitestore.SynchronousFull, sqlitestore.SynchronousNormal} {
		for _, gate := range []string{"gated", "ungated"} {
			for _, callers := range []int{1, 64} {
				name := string(sync) + "/" + gate + "/callers=" + strconv.Itoa(callers)
				b.Run(name+"/executed", func(b *testing.B) { benchClaim(b, sync, gate == "gated", callers, false) })
				b.Run(name+"/replay", func(b *testing.B) { benchClaim(b, sync, gate == "gated", callers, true) })
			}
		}
	}
}

func benchClaim(b *testing.B, sync sqlitestore.Synchronous, gated bool, callers int, replay bool) {
	db, _ := openDB(b, sqlitestore.WithSynchronous(sync))
	opts := []sqlitestore.Option{sqlitestore.WithSweepInterval(0)}
	if !gated {
		opts = append(opts, sqlitestore.Ungated())
	}
	s := newStoreOn(b, db, opts...)
	ctx := b.Context()
	fp := []byte("fingerprint-of-the-request-00000")
	if replay {
		c, err := s.Claim(ctx, "replayed", fp, time.Minute, store.ClaimOptions{})
		if err != nil || s.Complete(ctx, "replayed", c.Token, make([]byte, 200), time.Hour) != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.SetParallelism((callers + 1) / 2)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "replayed"
			if !replay {
				key = "k-" + strconv.FormatInt(n.Add(1), 10)
			}
			c, err := s.Claim(ctx, key, fp, time.Minute, store.ClaimOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			if replay {
				if c.Won() {
					b.Error("a replay won")
				}
				continue
			}
			if err := s.Complete(ctx, key, c.Token, make([]byte, 200), time.Hour); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
