package postgresstore

import (
	"context"
	"time"
)

// ClaimSQL returns the claim statement of s, for tests that run it inside
// a transaction of their own, with the arguments of a claim of key by
// token with fp for lease, without a keep.
func ClaimSQL(s *Store, key, token, fp string, lease time.Duration) (string, []any) {
	return s.sql.claim, []any{[]byte(key), []byte(token), []byte(fp), int64(lease / time.Microsecond), int64(0), false}
}

// ChannelOf returns the channel of the purges of s.
func ChannelOf(ctx context.Context, s *Store) (string, error) { return s.channel(ctx) }
