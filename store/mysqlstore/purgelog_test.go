package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestPurgeLog runs storetest's purge log suite on a table of its own per
// case, each instance a store on a pool of its own (of one connection),
// as each server's is.
func TestPurgeLog(t *testing.T) {
	t.Parallel()
	storetest.RunPurgeLog(t, func(t *testing.T) storetest.PurgeLogRig {
		table := newTableName()
		return storetest.PurgeLogRig{
			Open: func(t *testing.T) storetest.PurgeLogInstance {
				s, db := newStoreOn(t, mysqltest.DB(t, 1), table, mysqlstore.WithSweepInterval(0), mysqlstore.WithInvalidationInterval(10*time.Millisecond))
				return storetest.PurgeLogInstance{Store: s, Pause: storetest.PausePool(db)}
			},
			Age: func(t *testing.T) {
				q := "UPDATE " + mysqltest.Quote(table+"_purges") + " SET purged_at = purged_at - INTERVAL 2 HOUR"
				if _, err := mysqltest.DB(t, 1).ExecContext(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
