package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestPurgeLog runs storetest's purge log suite on a fresh file per case,
// each instance a pool of its own on it, as processes sharing the file
// are.
func TestPurgeLog(t *testing.T) {
	t.Parallel()
	storetest.RunPurgeLog(t, func(t *testing.T) storetest.PurgeLogRig {
		path := filepath.Join(t.TempDir(), "purges.db")
		return storetest.PurgeLogRig{
			Open: func(t *testing.T) storetest.PurgeLogInstance {
				db, _ := openAt(t, path, sqlitestore.WithMaxConns(1))
				s := newStoreOn(t, db, sqlitestore.WithSweepInterval(0), sqlitestore.WithInvalidationInterval(10*time.Millisecond))
				return storetest.PurgeLogInstance{Store: s, Pause: storetest.PausePool(db)}
			},
			Age: func(t *testing.T) {
				db, _ := openAt(t, path)
				if _, err := db.ExecContext(t.Context(), "UPDATE "+sqlitestore.DefaultTable+"_purges SET purged_at = purged_at - 2 * 3600 * 1000"); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
