package sqlitestore

import "context"

// Ungated turns the store's in-process write gate off, for tests and
// benchmarks that compare the two.
func Ungated() Option { return func(c *config) { c.ungated = true } }

// PollLog is one poll of a subscription of s, from id on: the rows of the
// purge log it reads.
func PollLog(ctx context.Context, s *Store, id int64) (int, error) {
	rows, err := s.logFrom(ctx, id, 257)
	return len(rows), err
}
