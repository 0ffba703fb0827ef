package migratestore

import "github.com/grpc-idempotency/idempotency/store"

var _ store.RecordLimiter = (*Store)(nil)

// MaxRecordBytes implements [store.RecordLimiter]: the smaller bound of
// the two stores that report one (either may store an outcome: the new
// store a key claimed there, the old store a key still in flight there),
// or 0 when neither reports one yet, so that NewServer refuses a
// WithMaxResponseBytes that either store cannot hold (a move to or from
// MySQL and its max_allowed_packet).
func (s *Store) MaxRecordBytes() int {
	limit := 0
	for _, st := range [...]store.Store{s.from, s.to} {
		l, ok := st.(store.RecordLimiter)
		if !ok {
			continue
		}
		if n := l.MaxRecordBytes(); n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	return limit
}
