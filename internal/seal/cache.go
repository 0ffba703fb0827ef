package seal

import (
	"sync"
	"sync/atomic"
)

// MaxCached bounds a [Cache]: past it the cache starts again (a
// derivation is an HKDF, microseconds).
const MaxCached = 4096

// Cache holds the keys derived for a server, by owner (the keyring a
// secret belongs to: two keyrings may give one ID two secrets), key ID and
// scope. Its zero value is empty and ready; it is safe for concurrent use.
type Cache[O comparable] struct {
	derived sync.Map // cacheID[O] → *cached[O]
	n       atomic.Int64
	last    atomic.Pointer[cached[O]] // the key Key returned last, looked at first
}

type cacheID[O comparable] struct {
	owner     O
	id, scope string
}

// cached is a derived key with what it was derived from.
type cached[O comparable] struct {
	cacheID[O]
	k *Key
}

// Key returns the key of scope derived from secret, the secret of the key
// of owner named id ([Derive]): derived once, then cached.
func (c *Cache[O]) Key(owner O, id string, secret []byte, scope string) *Key {
	if l := c.last.Load(); l != nil && l.owner == owner && l.id == id && l.scope == scope {
		return l.k
	}
	cid := cacheID[O]{owner: owner, id: id, scope: scope}
	if e, ok := c.derived.Load(cid); ok {
		c.last.Store(e.(*cached[O]))
		return e.(*cached[O]).k
	}
	k := Derive(secret, scope)
	if c.n.Add(1) > MaxCached {
		c.derived.Clear()
		c.n.Store(1)
	}
	actual, _ := c.derived.LoadOrStore(cid, &cached[O]{cid, k})
	c.last.Store(actual.(*cached[O]))
	return actual.(*cached[O]).k
}
