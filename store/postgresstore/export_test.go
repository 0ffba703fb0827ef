package postgresstore

import "context"

// ClaimSQL returns the claim statement of s, for tests that run it inside
// a transaction of their own.
func ClaimSQL(s *Store) string { return s.sql.claim }

// ChannelOf returns the channel of the purges of s.
func ChannelOf(ctx context.Context, s *Store) (string, error) { return s.channel(ctx) }
