package mysqlstore_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// TestKeyAndFingerprintLimits: keys and fingerprints of up to 255 bytes
// are kept byte for byte, and compared byte for byte (keys that differ in
// case or trailing spaces are different keys), on connections without
// strict mode too; a longer one is an argument error and writes nothing,
// so that a server that truncates never folds two keys into one.
func TestKeyAndFingerprintLimits(t *testing.T) {
	t.Parallel()
	cfg := mysqltest.Config(t)
	cfg.Params = map[string]string{"sql_mode": "''"} // no strict mode: the server would truncate
	s, db := newStoreFrom(t, cfg, 2, mysqlstore.WithSweepInterval(0))
	ctx := t.Context()
	long, fp := strings.Repeat("k", 255), bytes.Repeat([]byte{0xff}, 255)
	c, err := s.Claim(ctx, long, fp, time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim of a 255-byte key with a 255-byte fingerprint: won=%v %v", c.Won(), err)
	}
	if err := s.Complete(ctx, long, c.Token, []byte("data"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, long, nil, time.Minute, store.ClaimOptions{}); err != nil || got.Won() || !bytes.Equal(got.Existing.Fingerprint, fp) {
		t.Fatalf("replay of the 255-byte key: won=%v fingerprint %x, %v", got.Won(), got.Existing.Fingerprint, err)
	}
	for _, tc := range []struct {
		name string
		key  string
		fp   []byte
	}{
		{"key of 256 bytes", long + "x", []byte("fp")},
		{"fingerprint of 256 bytes", "short", append(fp, 0)},
	} {
		if _, err := s.Claim(ctx, tc.key, tc.fp, time.Minute, store.ClaimOptions{}); err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Fatalf("Claim with a %s: %v, want an argument error", tc.name, err)
		}
	}
	for _, key := range []string{"Case", "case", "case "} {
		if c, err := s.Claim(ctx, key, []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
			t.Fatalf("Claim of %q: won=%v %v; want a key of its own", key, c.Won(), err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tableOf(t, s)).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d rows (%v), want the 255-byte key and the three of different case and spaces", n, err)
	}
}
