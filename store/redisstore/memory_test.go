package redisstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestMemoryPerRecord measures with MEMORY USAGE what one entry costs, with
// the shapes the interceptor uses: a 43-character key (base64url SHA-256),
// a 33-byte fingerprint and, once completed, 200 bytes of data. The numbers
// are logged for doc.go and bounded so a layout change that bloats entries
// shows.
func TestMemoryPerRecord(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	sum := sha256.Sum256([]byte(t.Name()))
	key := base64.RawURLEncoding.EncodeToString(sum[:])
	rkey := redisstore.DefaultPrefix + key
	fingerprint := append([]byte{1}, sum[:]...)

	c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	inFlight := rdb.MemoryUsage(ctx, rkey, 0).Val()
	if err := st.Complete(ctx, key, c.Token, bytes.Repeat([]byte{0xab}, 200), longTTL); err != nil {
		t.Fatal(err)
	}
	completed := rdb.MemoryUsage(ctx, rkey, 0).Val()
	encoding := rdb.ObjectEncoding(ctx, rkey).Val()
	t.Logf("MEMORY USAGE: in flight %d bytes, completed with 200-byte data %d bytes (encoding %s)", inFlight, completed, encoding)
	if inFlight <= 0 || inFlight > 192 || completed <= 0 || completed > 512 {
		t.Fatalf("MEMORY USAGE in flight %d, completed %d: out of the expected range", inFlight, completed)
	}
}
