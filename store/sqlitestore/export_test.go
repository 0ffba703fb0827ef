package sqlitestore

import "context"

// Ungated turns the store's in-process write gate off, for tests and
// benchmarks that compare the two.
func Ungated() Option { return func(c *config) { c.ungated = true } }

// OnPurgeRead makes f run in each round of Purge, between its read of the
// entry and its delete, for tests that change the entry in between.
func OnPurgeRead(f func()) Option { return func(c *config) { c.purgeRead = f } }

// PollLog is one poll of a subscription of s, from id on: the rows of the
// purge log it reads.
func PollLog(ctx context.Context, s *Store, id int64) (int, error) {
	rows, err := s.logFrom(ctx, id, 257)
	return len(rows), err
}
