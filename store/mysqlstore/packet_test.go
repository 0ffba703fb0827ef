package mysqlstore_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// TestMaxAllowedPacket: the store reports the largest outcome the
// server's max_allowed_packet lets Complete store, once Migrate has read
// it; an outcome of that size is stored and replayed, and one a packet
// long is refused. A server whose WithMaxResponseBytes lets an outcome be
// larger is refused at start-up, with both values named, where it used to
// start and fail every Complete of such an outcome (and run its handler
// again once the lease ended); one within the bound starts.
func TestMaxAllowedPacket(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 2, mysqlstore.WithSweepInterval(0))
	fresh := mysqlstore.New(db, mysqlstore.WithTable(newTableName()), mysqlstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = fresh.Close() })
	if got := fresh.MaxRecordBytes(); got != 0 {
		t.Fatalf("MaxRecordBytes before Migrate = %d, want 0 (not known)", got)
	}
	var packet int
	if err := db.QueryRowContext(t.Context(), "SELECT @@max_allowed_packet").Scan(&packet); err != nil {
		t.Fatal(err)
	}
	limit := s.MaxRecordBytes()
	if limit <= 0 || limit >= packet {
		t.Fatalf("MaxRecordBytes = %d with max_allowed_packet %d", limit, packet)
	}

	ctx := t.Context()
	data := bytes.Repeat([]byte{0xa5}, limit)
	c, err := s.Claim(ctx, "largest", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	if err := s.Complete(ctx, "largest", c.Token, data, time.Hour); err != nil {
		t.Fatalf("Complete of %d bytes (MaxRecordBytes): %v", len(data), err)
	}
	if r, err := s.Claim(ctx, "largest", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !bytes.Equal(r.Existing.Data, data) {
		t.Fatalf("replay of %d bytes: %d bytes, %v", len(data), len(r.Existing.Data), err)
	}
	c, err = s.Claim(ctx, "too large", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	if err := s.Complete(ctx, "too large", c.Token, make([]byte, packet), time.Hour); err == nil {
		t.Fatalf("Complete of %d bytes (max_allowed_packet) succeeded; the bound is not the server's", packet)
	}

	for _, tc := range []struct {
		max  int
		fail bool
	}{
		{max: packet, fail: true},
		{max: limit, fail: true}, // the record's own fields do not fit beside it
		{max: limit - 64<<10, fail: false},
	} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			var got any
			func() {
				defer func() { got = recover() }()
				srv := idempotency.NewServer(s, idempotency.WithMaxResponseBytes(tc.max))
				_ = srv.Close()
			}()
			if !tc.fail {
				if got != nil {
					t.Fatalf("NewServer with WithMaxResponseBytes(%d) under MaxRecordBytes %d panicked: %v", tc.max, limit, got)
				}
				return
			}
			msg := fmt.Sprint(got)
			for _, want := range []string{fmt.Sprintf("WithMaxResponseBytes(%d)", tc.max), fmt.Sprint(limit), "max_allowed_packet"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("NewServer with WithMaxResponseBytes(%d) over MaxRecordBytes %d: %v; want a refusal naming %q", tc.max, limit, got, want)
				}
			}
		})
	}
}

// TestMaxAllowedPacketMigrating: a move to or from MySQL through
// migratestore keeps the start-up check of max_allowed_packet, since
// either store may take the outcome: the migratestore's MaxRecordBytes is
// the smaller bound of the two, so NewServer refuses a WithMaxResponseBytes
// that MySQL's packet cannot hold.
func TestMaxAllowedPacketMigrating(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 2, mysqlstore.WithSweepInterval(0))
	limit := s.MaxRecordBytes()
	for name, m := range map[string]*migratestore.Store{
		"to MySQL":   migratestore.New(memorystore.New(), s),
		"from MySQL": migratestore.New(s, memorystore.New()),
	} {
		t.Run(name, func(t *testing.T) {
			if l, ok := any(m).(store.RecordLimiter); !ok || l.MaxRecordBytes() != limit {
				t.Errorf("migratestore as a store.RecordLimiter: %v; want MaxRecordBytes %d, MySQL's", ok, limit)
			}
			var got any
			func() {
				defer func() { got = recover() }()
				srv := idempotency.NewServer(m, idempotency.WithMaxResponseBytes(limit))
				_ = srv.Close()
			}()
			if !strings.Contains(fmt.Sprint(got), "max_allowed_packet") {
				t.Fatalf("NewServer on a migratestore with WithMaxResponseBytes(%d) over MySQL's MaxRecordBytes %d: %v; want a refusal", limit, limit, got)
			}
		})
	}
}
