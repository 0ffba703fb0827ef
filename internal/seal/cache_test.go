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
// secrets) and for another ID of the same owner (a keyring's older key).
func TestCache(t *testing.T) {
	t.Parallel()
	var c seal.Cache[*int]
	a, b := new(int), new(int)
	k := c.Key(a, "k1", secret(1), "acme")
	if c.Key(a, "k1", secret(1), "acme") != k {
		t.Errorf("the same owner, ID and scope derived again")
	}
	// Right after k1 (the key looked at first), then from the map.
	for _, when := range []string{"after k1", "again"} {
		if _, ok := k.Open(nil, c.Key(a, "k2", secret(2), "acme").Seal(nil, "k2", "sk", nil), "sk"); ok {
			t.Errorf("%s: the owner's key k2 is its key k1", when)
		}
		c.Key(a, "k1", secret(1), "acme")
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

// A cache holds at most MaxCached keys: past it, it starts again, and
// what it returns after is still each scope's own key.
func TestCacheBound(t *testing.T) {
	t.Parallel()
	var c seal.Cache[string]
	first := c.Key("owner", "k1", secret(1), "t0")
	for i := range 2*seal.MaxCached + 1 {
		c.Key("owner", "k1", secret(1), fmt.Sprint("t", i))
		if n := c.Len(); n > seal.MaxCached {
			t.Fatalf("after %d scopes the cache holds %d keys, over MaxCached (%d)", i+1, n, seal.MaxCached)
		}
	}
	sealed := c.Key("owner", "k1", secret(1), "t0").Seal(nil, "k1", "sk", []byte("t0"))
	if plain, ok := first.Open(nil, sealed, "sk"); !ok || string(plain) != "t0" {
		t.Errorf("the key of t0 derived again after the cache started again opens %q, %v; want t0", plain, ok)
	}
}

// Past MaxCached derivations the cache starts again, and every key it
// returns, under concurrent use, is still the scope's own: a record one
// goroutine seals opens under the key another derives; and it still holds
// no more than MaxCached keys (and one each for the workers that cleared
// it at once). Run with -race.
func TestCacheChurn(t *testing.T) {
	t.Parallel()
	var c seal.Cache[string]
	const workers, scopes = 4, seal.MaxCached + seal.MaxCached/2
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
	if n := c.Len(); n > seal.MaxCached+workers {
		t.Errorf("after %d scopes the cache holds %d keys, over MaxCached (%d)", scopes, n, seal.MaxCached)
	}
}
