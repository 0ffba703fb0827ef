package redisstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Inspector = (*Store)(nil)

// Lookup implements [store.Inspector.Lookup] with one read-only script on
// the key (GET, PEXPIRETIME for Expires, and PTTL, which tells a kept
// entry in flight from an abandoned one): one round trip, on the node that
// owns the key. An entry of layout 1 is read too. Info.Claimed is
// read from the owner token ([store.TokenTime]): the claiming server's
// clock, and zero for a token of an earlier release; Info.Completed is
// always zero, as the layout keeps no completion time; Info.Size is the
// length of the key with its prefix and of its value.
func (s *Store) Lookup(ctx context.Context, key string) (store.Info, error) {
	rkey := s.prefix + key
	reply, err := s.eval(ctx, s.rdb, lookupScript, []string{rkey}, "")
	if err != nil {
		return store.Info{}, fmt.Errorf("redisstore: lookup %q: %w", rkey, err)
	}
	_, info, err := decodeVerdict(s.prefix, key, reply)
	if err != nil {
		return store.Info{}, fmt.Errorf("redisstore: lookup %q: %w", rkey, err)
	}
	return info, nil
}

// eval runs sc on c by EVALSHA, and by EVAL when c answers NOSCRIPT (the
// script was not loaded yet: one more round trip).
func (s *Store) eval(ctx context.Context, c redis.Scripter, sc *script, keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, err := c.EvalSha(ctx, sc.sha, keys, args...).Result()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		reply, err = c.Eval(ctx, sc.src, keys, args...).Result()
	}
	return reply, err
}

// master is a node whose keys List and Stats scan: the one server (or
// Sentinel-managed master) of a client, or a master of a Cluster.
type master struct {
	addr string // "" but on a Cluster
	c    redis.Scripter
}

// masters returns the nodes to scan, a Cluster's in the order of their
// addresses.
func (s *Store) masters(ctx context.Context) ([]master, error) {
	if s.cluster == nil {
		return []master{{c: s.rdb}}, nil
	}
	var (
		mu sync.Mutex
		ms []master
	)
	err := s.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		ms = append(ms, master{addr: c.Options().Addr, c: c})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ms, func(a, b master) int { return strings.Compare(a.addr, b.addr) })
	return ms, nil
}

// statsSample is how many keys Stats examines per master at most.
const statsSample = 1000

// Stats implements [store.Inspector.Stats] with one read-only script per
// master (each Cluster master in turn), which scans the master's key space
// from its start until it has examined 1,000 keys, of this store or not,
// and counts this store's entries among them (the keys under its prefix
// with no ':' after it: see [WithPrefix]) by state, with their bytes
// (key and value, as Info.Size counts them). A master that holds no more
// keys than that is counted exactly. Otherwise the counts are estimated
// (Stats.Estimated): scaled by DBSIZE over the keys examined. SCAN visits
// Redis's hash table in bucket order, and keys land in buckets by a hash
// of their names, so the first keys of a scan are a random sample of the
// master's keys: the estimate of a share p of its keys is off by about
// sqrt(p(1-p)/1000) of them, 1.6% of the keys for a half, 0.3% for a
// state that holds 1% of them. The cost is bounded, whatever the number
// of keys: one round trip per master, and about a millisecond of the
// master's time (its scripts run one at a time), measured by this
// package's benchmarks.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	ms, err := s.masters(ctx)
	if err != nil {
		return store.Stats{}, fmt.Errorf("redisstore: stats: %w", err)
	}
	var total store.Stats
	for _, m := range ms {
		reply, err := s.eval(ctx, m.c, statsScript, nil, s.prefix, statsSample)
		if err != nil {
			return store.Stats{}, fmt.Errorf("redisstore: stats of %s: %w", m.nameOf(), err)
		}
		st, err := decodeStatsReply(reply)
		if err != nil {
			return store.Stats{}, fmt.Errorf("redisstore: stats of %s: %w", m.nameOf(), err)
		}
		total.InFlight.Entries += st.InFlight.Entries
		total.InFlight.Bytes += st.InFlight.Bytes
		total.Completed.Entries += st.Completed.Entries
		total.Completed.Bytes += st.Completed.Bytes
		total.Abandoned.Entries += st.Abandoned.Entries
		total.Abandoned.Bytes += st.Abandoned.Bytes
		total.Estimated = total.Estimated || st.Estimated
	}
	return total, nil
}

func (m master) nameOf() string {
	if m.addr == "" {
		return "the server"
	}
	return m.addr
}

// decodeStatsReply reads a reply of statsScript, scaling its counts up to
// the master's keys when it did not examine them all.
func decodeStatsReply(reply any) (store.Stats, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) != 9 {
		return store.Stats{}, corrupt("unexpected stats reply %s", describe(reply))
	}
	n := make([]int64, len(arr))
	for i, v := range arr {
		if n[i], ok = v.(int64); !ok || n[i] < 0 {
			return store.Stats{}, corrupt("unexpected stats reply %s", describe(reply))
		}
	}
	examined, whole, dbsize := n[0], n[1] == 1, n[2]
	st := store.Stats{
		InFlight:  store.Count{Entries: n[3], Bytes: n[4]},
		Completed: store.Count{Entries: n[5], Bytes: n[6]},
		Abandoned: store.Count{Entries: n[7], Bytes: n[8]},
	}
	if whole || examined == 0 {
		return st, nil
	}
	scale := func(v int64) int64 {
		return int64(math.Round(float64(v) * float64(dbsize) / float64(examined)))
	}
	st.Estimated = true
	st.InFlight = store.Count{Entries: scale(st.InFlight.Entries), Bytes: scale(st.InFlight.Bytes)}
	st.Completed = store.Count{Entries: scale(st.Completed.Entries), Bytes: scale(st.Completed.Bytes)}
	st.Abandoned = store.Count{Entries: scale(st.Abandoned.Entries), Bytes: scale(st.Abandoned.Bytes)}
	return st, nil
}
