package mysqlstore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// BenchmarkInvalidationPoll is one poll of a subscription on a log with
// nothing new: what each server pays every interval.
func BenchmarkInvalidationPoll(b *testing.B) {
	s, _ := newStore(b, 1)
	for b.Loop() {
		if n, err := mysqlstore.PollLog(b.Context(), s, 0); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}
