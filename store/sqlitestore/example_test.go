package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// A store on a database file: Open sets the file up (WAL, a busy timeout,
// synchronous FULL), Migrate creates the table, and the store is then
// given to the interceptor (idempotency.UnaryServerInterceptor(s)). Here
// it is driven by hand: a claim, its completion, and a replay.
func Example() {
	dir, err := os.MkdirTemp("", "sqlitestore")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitestore.Open(filepath.Join(dir, "idempotency.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s := sqlitestore.New(db)
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	c, err := s.Claim(ctx, "key", []byte("fingerprint"), time.Minute, store.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first claim won:", c.Won(), "attempt", c.Attempt)
	if err := s.Complete(ctx, "key", c.Token, []byte("the answer"), time.Hour); err != nil {
		log.Fatal(err)
	}
	again, err := s.Claim(ctx, "key", []byte("fingerprint"), time.Minute, store.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retry won:", again.Won(), "state", again.Existing.State, "data", string(again.Existing.Data))
	// Output:
	// first claim won: true attempt 1
	// retry won: false state completed data the answer
}
