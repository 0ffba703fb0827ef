package sqlitestore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// BenchmarkInvalidationPoll is one poll of a subscription on a log with
// nothing new: what each process pays every interval.
func BenchmarkInvalidationPoll(b *testing.B) {
	s, _ := newStore(b)
	for b.Loop() {
		if n, err := sqlitestore.PollLog(b.Context(), s, 0); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}
