package seal_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

// A cache derives a key once per owner, ID and scope, and derives another
// for another owner of the same ID (two keyrings may give one ID two
// secrets).
func TestCache(t *testing.T) {
	t.Parallel()
	var c seal.Cache[*int]
	a, b := new(int), new(int)
	k := c.Key(a, "k1", secret(1), "acme")
	if c.Key(a, "k1", secret(1), "acme") != k {
		t.Errorf("the same owner, ID and scope derived again")
	}
	other := c.Key(b, "k1", secret(2), "acme")
	sealed := other.Seal(nil, "k1", "sk", []byte("record"))
	if _, ok := k.Open(nil, sealed, "sk"); ok {
		t.Errorf("another owner's key of the same ID is the first owner's")
	}
	if _, ok := c.Key(a, "k1", secret(1), "globex").Open(nil, k.Seal(nil, "k1", "sk", nil), "sk"); ok {
		t.Errorf("another scope's key opens the first scope's record")
	}
}

// Past MaxCached derivations the cache starts again, and every key it
// returns, under concurrent use, is still the scope's own: a record one
// goroutine seals opens under the key another derives. Run with -race.
func TestCacheChurn(t *testing.T) {
	t.Parallel()
	var c seal.Cache[string]
	const workers, scopes = 4, seal.MaxCached/2 + 1
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range scopes {
				scope := fmt.Sprint("t", (i*7+w)%scopes)
				sealed := c.Key("owner", "k1", secret(1), scope).Seal(nil, "k1", "sk", []byte(scope))
				plain, ok := seal.Derive(secret(1), scope).Open(nil, sealed, "sk")
				if !ok || !bytes.Equal(plain, []byte(scope)) {
					t.Errorf("%s: the cached key sealed what the scope's key opens as %q, %v", scope, plain, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
}
