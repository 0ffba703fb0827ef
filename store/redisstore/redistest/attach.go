package redistest

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// nodeHooks adds a hook to a client once. On a redis.ClusterClient it adds
// it to the client of every node, those known now and those the client
// meets later, since a store sends its commands through the node clients.
// Its zero value is ready to use.
type nodeHooks struct {
	mu    sync.Mutex
	added map[*redis.Client]bool
}

// attach adds h to rdb, or to every node client of a ClusterClient.
func (n *nodeHooks) attach(ctx context.Context, rdb redis.UniversalClient, h redis.Hook) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		rdb.AddHook(h)
		return nil
	}
	add := func(c *redis.Client) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.added == nil {
			n.added = map[*redis.Client]bool{}
		}
		if !n.added[c] {
			n.added[c] = true
			c.AddHook(h)
		}
	}
	cc.OnNewNode(add)
	return cc.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		add(c)
		return nil
	})
}
