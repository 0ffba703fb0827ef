package memorystore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Inspector = (*Store)(nil)

// Lookup implements [store.Inspector.Lookup] under the key's shard lock.
// It ignores ctx.
func (s *Store) Lookup(_ context.Context, key string) (store.Info, error) {
	st := s.st
	sh, _ := st.shard(key)
	now := st.now()
	sh.mu.Lock()
	e, found := sh.m[key]
	sh.mu.Unlock()
	if !found || e.expires <= now {
		return store.Info{}, fmt.Errorf("memorystore: lookup %q: %w", key, store.ErrNotFound)
	}
	info := st.info(key, e, now)
	info.Fingerprint, info.Data = clone(e.fingerprint), clone(e.data)
	return info, nil
}

// Purge implements [store.Inspector.Purge] under the key's shard lock, then
// tells the subscribers of [Store.Invalidations]. It ignores ctx.
func (s *Store) Purge(_ context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	st := s.st
	sh, _ := st.shard(key)
	now := st.now()
	sh.mu.Lock()
	e, found := sh.m[key]
	if !found || e.expires <= now {
		sh.mu.Unlock()
		return store.Info{}, fmt.Errorf("memorystore: purge %q: %w", key, store.ErrNotFound)
	}
	err := refusal(e, opts)
	if err == nil {
		st.remove(sh, key, e)
	}
	sh.mu.Unlock()
	info := st.info(key, e, now)
	info.Fingerprint, info.Data = clone(e.fingerprint), clone(e.data)
	if err != nil {
		return info, fmt.Errorf("memorystore: purge %q: %w", key, err)
	}
	st.subs.purged(key)
	return info, nil
}

// refusal returns why opts does not let Purge delete e, or nil.
func refusal(e entry, opts store.PurgeOptions) error {
	if opts.Token != "" {
		if tok, ok := parseToken(opts.Token); !ok || tok != e.token {
			return store.ErrChanged
		}
	}
	switch {
	case e.state == store.StateInFlight && !opts.InFlight:
		return store.ErrInFlight
	case e.state == store.StateCompleted && opts.InFlight:
		return store.ErrChanged
	}
	return nil
}

// info describes e, the entry under key, at now, without its fingerprint
// and data.
func (st *state) info(key string, e entry, now int64) store.Info {
	i := store.Info{
		Key:     key,
		State:   e.shown(now),
		Token:   formatToken(e.token),
		Size:    entrySize(key, &e),
		Claimed: st.wall(e.claimed),
		Expires: st.wall(e.expires),
		Attempt: int(e.attempt),
	}
	if i.State == store.StateInFlight && e.kept() {
		i.Expires = st.wall(e.completed) // its lease, not its keep
	}
	if e.state == store.StateCompleted {
		i.Completed = st.wall(e.completed)
	}
	return i
}

// wall returns the wall-clock time of t, nanoseconds since the epoch.
func (st *state) wall(t int64) time.Time {
	return st.epoch.Add(time.Duration(t)).Round(0)
}

// List implements [store.Inspector.List]. It walks the shards in turn, and
// each shard's entries in the order of their slots in its expiry heap (an
// order of its own, neither by key nor by age), holding the shard's lock
// for the slots of one page at most: a page examines opts.Limit slots, a
// slot free or taken. An entry keeps its slot while it lives, but for a
// shard that rebuilds its map after shrinking to a quarter of its peak:
// the walk then starts that shard again, and may list its entries twice.
// It ignores ctx.
func (s *Store) List(_ context.Context, opts store.ListOptions) (store.Page, error) {
	limit, err := opts.PageSize()
	if err != nil {
		return store.Page{}, fmt.Errorf("memorystore: %w", err)
	}
	c, err := parseCursor(opts.Cursor)
	if err != nil {
		return store.Page{}, err
	}
	st := s.st
	var page store.Page
	wallNow := time.Now()
	for examined := 0; c.shard < numShards && examined < limit; {
		sh := &st.shards[c.shard]
		now := st.now()
		sh.mu.Lock()
		if c.gen != sh.gen {
			c.gen, c.slot = sh.gen, 0 // rebuilt since: start it again
		}
		slots := sh.exp.slots
		for ; c.slot < len(slots) && examined < limit; c.slot++ {
			examined++
			key := slots[c.slot].key
			e, found := sh.m[key]
			if !found || int(e.slot) != c.slot || e.expires <= now {
				continue // a free slot, or an expired entry
			}
			info := st.info(key, e, now)
			if opts.Matches(info, wallNow) {
				info.Fingerprint = clone(e.fingerprint)
				page.Entries = append(page.Entries, info)
			}
		}
		done := c.slot >= len(slots)
		sh.mu.Unlock()
		if done {
			c = cursor{shard: c.shard + 1}
			if c.shard < numShards {
				sh := &st.shards[c.shard]
				sh.mu.Lock()
				c.gen = sh.gen
				sh.mu.Unlock()
			}
		}
	}
	if c.shard < numShards {
		page.Next = c.String()
	}
	return page, nil
}

// cursor is where a walk of List stands: a shard, the generation of its
// slots (shard.gen) and a slot.
type cursor struct {
	shard int
	gen   uint64
	slot  int
}

// cursorPrefix starts every cursor of this store.
const cursorPrefix = "m1."

func (c cursor) String() string {
	return cursorPrefix + strconv.Itoa(c.shard) + "." + strconv.FormatUint(c.gen, 10) + "." + strconv.Itoa(c.slot)
}

// parseCursor reads a cursor of String; "" is the start of a walk.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	bad := fmt.Errorf("memorystore: list cursor %q: %w", s, store.ErrCursor)
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return cursor{}, bad
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return cursor{}, bad
	}
	shard, err1 := strconv.Atoi(parts[0])
	gen, err2 := strconv.ParseUint(parts[1], 10, 64)
	slot, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || shard < 0 || shard >= numShards || slot < 0 {
		return cursor{}, bad
	}
	return cursor{shard: shard, gen: gen, slot: slot}, nil
}

// Stats implements [store.Inspector.Stats] exactly. Each shard keeps its
// counts as entries come and go, so Stats costs O(shards), but for the
// abandoned entries: an entry becomes abandoned when its lease ends,
// without a write, so Stats walks the entries of each shard that holds
// an entry in flight, to count those whose lease has ended. It first
// removes the expired entries of each shard whose expiry heap says some
// are due, as the sweeper would, so that the counts are of live entries
// only; that costs O(log n) per entry removed, work the sweeper would
// otherwise do. It ignores ctx.
func (s *Store) Stats(_ context.Context) (store.Stats, error) {
	st := s.st
	var stats store.Stats
	for i := range st.shards {
		sh := &st.shards[i]
		st.sweepShard(sh)
		sh.mu.Lock()
		in, done := sh.live[store.StateInFlight-1], sh.live[store.StateCompleted-1]
		var gone tally
		if in.n > 0 {
			gone = sh.abandoned(st.now())
		}
		sh.mu.Unlock()
		stats.InFlight.Entries += in.n - gone.n
		stats.InFlight.Bytes += in.bytes - gone.bytes
		stats.Abandoned.Entries += gone.n
		stats.Abandoned.Bytes += gone.bytes
		stats.Completed.Entries += done.n
		stats.Completed.Bytes += done.bytes
	}
	return stats, nil
}

// abandoned counts the live abandoned entries of sh at now. The caller
// holds sh.mu.
func (sh *shard) abandoned(now int64) tally {
	var t tally
	for key, e := range sh.m {
		if e.expires > now && e.shown(now) == store.StateAbandoned {
			t.add(1, entrySize(key, &e))
		}
	}
	return t
}
