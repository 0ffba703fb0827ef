package sqlitestore_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// subscriberEnv names the database file of the helper process of
// TestInvalidationsAcrossProcesses (see TestMain).
const subscriberEnv = "SQLITESTORE_TEST_SUBSCRIBER"

// TestInvalidationsAcrossProcesses: a purge in this process reaches the
// subscription of another OS process on the same file, through the purge
// log: the helper process subscribes, says "ready", and writes each key
// it is told, in hex, or "all".
func TestInvalidationsAcrossProcesses(t *testing.T) {
	t.Parallel()
	db, path := openDB(t)
	s := newStoreOn(t, db, sqlitestore.WithSweepInterval(0))
	key := "k-\x00\xff"
	c, err := s.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim: %+v, %v", c, err)
	}
	if err := s.Complete(t.Context(), key, c.Token, []byte("done"), time.Hour); err != nil {
		t.Fatal(err)
	}

	cmd, stdin, out := startHelper(t, subscriberEnv+"="+path)
	defer func() {
		_ = stdin.Close() // the helper's end
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper process: %v", err)
		}
	}()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the helper process did not get ready: %q %v", lines.Text(), lines.Err())
	}
	if _, err := s.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		lines.Scan()
		got <- lines.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-got:
		if line != hex.EncodeToString([]byte(key)) {
			t.Fatalf("the helper process was told %q, want the purge of %x", line, key)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the purge did not reach the helper process within 30s")
	}
}

// subscriberMain is the helper process of
// TestInvalidationsAcrossProcesses: it subscribes to the purges of the
// file subscriberEnv names, says "ready", writes each invalidation (a key
// in hex, or "all") on a line of its own, and returns 0 once its standard
// input is closed.
func subscriberMain() int {
	db, err := sqlitestore.Open(os.Getenv(subscriberEnv))
	if err != nil {
		fmt.Fprintln(os.Stdout, "error:", err)
		return 1
	}
	defer db.Close()
	s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0), sqlitestore.WithInvalidationInterval(10*time.Millisecond))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Invalidations(ctx)
	if err != nil {
		fmt.Fprintln(os.Stdout, "error:", err)
		return 1
	}
	fmt.Fprintln(os.Stdout, "ready")
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	for inv := range ch {
		if inv.All {
			fmt.Fprintln(os.Stdout, "all")
		} else {
			fmt.Fprintln(os.Stdout, hex.EncodeToString([]byte(inv.Key)))
		}
	}
	return 0
}
