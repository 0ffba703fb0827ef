package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// On a Cluster, the store sends each request to the client of the master
// that owns its key's slot (ClusterClient.MasterForKey), with a batcher per
// master, rather than through the ClusterClient itself: a WAIT must run on
// the connection that made the write it waits for, and the ClusterClient
// would send a keyless WAIT to any node. So the store follows MOVED and
// ASK itself, as the ClusterClient would: MOVED sends the request to the
// node named and reloads the slot map in the background; ASK sends it there
// after ASKING, on the same connection. Either counts one more round trip,
// only while slots move.

// route returns the client the request for key goes to, with its batcher
// (nil when pipelining is off).
func (s *Store) route(ctx context.Context, key string) (client, *batcher, error) {
	if s.cluster == nil {
		return s.rdb, s.batch, nil
	}
	node, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if !s.pipelining {
		return node, nil, nil
	}
	if b, ok := s.batchers.Load(node); ok {
		return node, b.(*batcher), nil
	}
	b, _ := s.batchers.LoadOrStore(node, s.newBatcher(node))
	return node, b.(*batcher), nil
}

// redirect is where a MOVED or ASK reply sends a request.
type redirect struct {
	addr string
	ask  bool
}

// redirectOf returns the redirect in err, if it is a MOVED or ASK reply
// ("MOVED 3999 127.0.0.1:6381").
func redirectOf(err error) (redirect, bool) {
	if err == nil || !isRedisError(err) {
		return redirect{}, false
	}
	msg := err.Error()
	var ask bool
	switch {
	case strings.HasPrefix(msg, "MOVED "):
	case strings.HasPrefix(msg, "ASK "):
		ask = true
	default:
		return redirect{}, false
	}
	f := strings.Fields(msg)
	if len(f) != 3 {
		return redirect{}, false
	}
	return redirect{addr: f[2], ask: ask}, true
}

// followRedirects resends the requests answered MOVED or ASK to the node
// named, up to the client's MaxRedirects times. A request whose node
// cannot be found keeps its redirect as its error, which the caller sees
// as a failure of the store (and a retry, once the slot map is reloaded,
// mends). It also reloads the slot map when a node could not be reached:
// a failed-over master has moved.
func (s *Store) followRedirects(ctx context.Context, reqs []*request) {
	for range s.maxRedirects {
		var groups map[redirect][]*request
		for _, r := range reqs {
			err := r.cmd.Err()
			switch {
			case err == nil || errors.Is(err, redis.Nil):
				// A reply: nil is how SET NX GET answers a won claim.
			case !isRedisError(err):
				s.cluster.ReloadState(ctx)
			default:
				if rd, ok := redirectOf(err); ok {
					if groups == nil {
						groups = map[redirect][]*request{}
					}
					groups[rd] = append(groups[rd], r)
				}
			}
		}
		if len(groups) == 0 {
			return
		}
		reqs = reqs[:0:0]
		for rd, group := range groups {
			if !rd.ask {
				s.cluster.ReloadState(ctx)
			}
			node, err := s.nodeAt(ctx, rd.addr)
			if err != nil {
				continue
			}
			s.exec(ctx, node, group, rd.ask)
			s.evalMissing(ctx, node, group, rd.ask)
			reqs = append(reqs, group...)
		}
	}
}

// nodeAt returns the client of the master at addr.
func (s *Store) nodeAt(ctx context.Context, addr string) (*redis.Client, error) {
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	err := s.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if err == nil && found == nil {
		err = fmt.Errorf("no master at %s", addr)
	}
	return found, err
}
