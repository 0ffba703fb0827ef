package memorystore_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// ringKeys returns 1024 keys of the length the interceptor uses (a hex
// SHA-256), distinct per goroutine.
func ringKeys(g int64) []string {
	keys := make([]string, 1024)
	for i := range keys {
		k := strconv.FormatInt(g, 16) + "-" + strconv.Itoa(i) + "-"
		for len(k) < 64 {
			k += "0"
		}
		keys[i] = k
	}
	return keys
}

// BenchmarkClaimComplete is a new request: claim a key that holds only an
// expired entry, then complete it with a 256-byte outcome.
func BenchmarkClaimComplete(b *testing.B) {
	s := memorystore.New()
	defer s.Close()
	ctx := b.Context()
	fp, data := make([]byte, 32), make([]byte, 256)
	var gid atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		keys := ringKeys(gid.Add(1))
		for i := 0; pb.Next(); i++ {
			k := keys[i&1023]
			c, err := s.Claim(ctx, k, fp, time.Minute, store.ClaimOptions{})
			if err != nil || !c.Won() {
				b.Errorf("Claim: won=%v err=%v", c.Won(), err)
				return
			}
			// A retention of 1ns: expired when the ring comes round.
			if err := s.Complete(ctx, k, c.Token, data, time.Nanosecond); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimExisting is a retry: claim a key that holds a completed
// outcome.
func BenchmarkClaimExisting(b *testing.B) {
	s := memorystore.New()
	defer s.Close()
	ctx := b.Context()
	fp, data := make([]byte, 32), make([]byte, 256)
	var gid atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		keys := ringKeys(gid.Add(1))
		for _, k := range keys {
			c, _ := s.Claim(ctx, k, fp, time.Minute, store.ClaimOptions{})
			if err := s.Complete(ctx, k, c.Token, data, time.Hour); err != nil {
				b.Error(err)
				return
			}
		}
		for i := 0; pb.Next(); i++ {
			c, err := s.Claim(ctx, keys[i&1023], fp, time.Minute, store.ClaimOptions{})
			if err != nil || c.Won() {
				b.Errorf("Claim: won=%v err=%v", c.Won(), err)
				return
			}
		}
	})
}

// BenchmarkBaselineGlobalMutexMap is the bare baseline: the same two steps
// on one map behind one mutex, with no tokens, copies or expiry.
func BenchmarkBaselineGlobalMutexMap(b *testing.B) {
	var mu sync.Mutex
	m := map[string][]byte{}
	data := make([]byte, 256)
	var gid atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		keys := ringKeys(gid.Add(1))
		for i := 0; pb.Next(); i++ {
			k := keys[i&1023]
			mu.Lock()
			_, found := m[k]
			m[k] = nil
			mu.Unlock()
			mu.Lock()
			m[k] = data
			mu.Unlock()
			_ = found
		}
	})
}
