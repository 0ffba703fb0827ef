package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// migrateBatch is how many keys one MIGRATE moves.
const migrateBatch = 50

// migrateTimeout is the MIGRATE timeout, in milliseconds.
const migrateTimeout = 5000

// MigrateOptions configures [Cluster.MigrateSlot]. The zero value runs
// each step at once.
type MigrateOptions struct {
	// Pause is slept after each step, to hold the windows between them
	// open while clients run.
	Pause time.Duration
	// Migrating, when set, is called once the slot is marked importing on
	// the target and migrating on the source, before its keys move.
	Migrating func()
}

// MigrateSlot moves slot from the master that owns it to the to-th master
// (in the order of [Cluster.Addrs]) the way redis-cli --cluster reshard
// does: CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the
// source, MIGRATE of its keys in batches, then CLUSTER SETSLOT NODE on the
// target, the source and the other masters. Meanwhile the source answers
// ASK for the keys it no longer holds, and once it is done the nodes
// answer MOVED. It does nothing when the slot is already on the to-th
// master, and returns the owner's index.
//
// Move slots to one master at a time. The target of a migration raises
// its configuration epoch above the highest it knows of, so that its claim
// on the slot wins; a node that has just done so for another migration may
// not have told the target yet, and its older claim then wins later, over
// gossip, leaving the slot with no owner. Migrations to a single target
// never race that way.
func (c *Cluster) MigrateSlot(ctx context.Context, slot, to int, opts MigrateOptions) (from int, err error) {
	from, err = c.SlotOwner(ctx, slot)
	if err != nil || from == to {
		return from, err
	}
	src, dst := c.admin(from), c.admin(to)
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		return from, err
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		return from, err
	}
	steps := []func() error{
		func() error { return dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err() },
		func() error { return src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err() },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return from, fmt.Errorf("migrate slot %d from %d to %d: %w", slot, from, to, err)
		}
	}
	if opts.Migrating != nil {
		opts.Migrating()
	}
	sleep(ctx, opts.Pause)
	if err := c.migrateKeys(ctx, src, c.nodes[to].addr(), slot, opts.Pause); err != nil {
		return from, fmt.Errorf("migrate slot %d from %d to %d: %w", slot, from, to, err)
	}
	// The target first, then the source, then the others, as redis-cli
	// does.
	order := []int{to, from}
	for i := range c.nodes {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := c.admin(i).Do(ctx, "cluster", "setslot", slot, "node", dstID).Err(); err != nil {
			return from, fmt.Errorf("migrate slot %d: SETSLOT NODE on node %d: %w", slot, i, err)
		}
	}
	return from, nil
}

// migrateKeys moves every key of slot from src to dstAddr.
func (c *Cluster) migrateKeys(ctx context.Context, src *redis.Client, dstAddr string, slot int, pause time.Duration) error {
	host, port, err := net.SplitHostPort(dstAddr)
	if err != nil {
		return err
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, migrateBatch).Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		args := []any{"migrate", host, port, "", 0, migrateTimeout, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("MIGRATE %d keys: %w", len(keys), err)
		}
		sleep(ctx, pause)
	}
}

// SlotOwner returns the index of the master that owns slot, by its own
// account (its "myself" line in CLUSTER NODES).
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (int, error) {
	for i := range c.nodes {
		nodes, err := c.admin(i).ClusterNodes(ctx).Result()
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, r := range f[8:] {
				if ownsSlot(r, slot) {
					return i, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no master owns slot %d", slot)
}

// ownsSlot reports whether a slot range of CLUSTER NODES ("0-5460",
// "5461"; not "[5461-<-id]", a slot being imported) holds slot.
func ownsSlot(r string, slot int) bool {
	lo, hi, found := strings.Cut(r, "-")
	if !found {
		hi = lo
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	return err1 == nil && err2 == nil && l <= slot && slot <= h
}

// admin returns the client of the i-th master the helpers use.
func (c *Cluster) admin(i int) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admins == nil {
		c.admins = make([]*redis.Client, len(c.nodes))
	}
	if c.admins[i] == nil {
		c.admins[i] = c.NodeClient(i)
	}
	return c.admins[i]
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
