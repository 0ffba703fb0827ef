package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Invalidator = (*Store)(nil)

// channelSuffix follows the key prefix in the name of the Redis channel
// of Invalidations: "idempotency:purged" by default.
const channelSuffix = "purged"

// channel returns the Redis channel the store's purges are published on.
func (s *Store) channel() string { return s.prefix + channelSuffix }

// Reconnection delays of Invalidations, while Redis cannot be reached.
const (
	resubscribeMin = 100 * time.Millisecond
	resubscribeMax = 5 * time.Second
)

// Invalidations implements [store.Invalidator.Invalidations] with Redis
// pub/sub: [Store.Purge] publishes the key it deleted on the channel
// prefix+"purged", from the script that deletes it, and each subscription
// holds a connection of its own (go-redis's PubSub; on a Cluster, a
// connection to one node, as PUBLISH reaches every node). It returns once
// Redis has confirmed the subscription, so that a purge made after it
// returns is delivered, and an error when it cannot subscribe.
//
// Redis pub/sub delivers at most once: while the connection is down, the
// purges published meanwhile are lost. go-redis reconnects and subscribes
// again (this method retries every 100 ms to 5 s while Redis cannot be
// reached); once it is subscribed again, an Invalidation with All set
// tells the subscriber that it may have missed purges. A subscriber that
// reads too slowly holds messages up in Redis's output buffer for the
// connection, until Redis drops the connection at its client-output-buffer-limit
// for pubsub (32 MB by default), which the same reconnection then reports.
func (s *Store) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	ps := s.rdb.Subscribe(ctx, s.channel())
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("redisstore: subscribe to %q: %w", s.channel(), err)
	}
	out := make(chan store.Invalidation)
	go func() {
		defer close(out)
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() }) // ends a Receive under way
		defer stop()
		defer ps.Close()
		forwardPurges(ctx, ps, out)
	}()
	return out, nil
}

// forwardPurges delivers the messages of ps to out until ctx is done.
func forwardPurges(ctx context.Context, ps *redis.PubSub, out chan<- store.Invalidation) {
	delay := resubscribeMin
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		var (
			inv     store.Invalidation
			deliver bool
		)
		switch m := msg.(type) {
		case *redis.Message:
			inv, deliver = store.Invalidation{Key: m.Payload}, true
		case *redis.Subscription:
			// Subscribed again after a reconnection: purges published
			// while the connection was down are lost.
			inv, deliver = store.Invalidation{All: true}, m.Kind == "subscribe"
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, resubscribeMax)
			continue
		}
		delay = resubscribeMin
		if !deliver {
			continue // a pong, or an unsubscription
		}
		select {
		case out <- inv:
		case <-ctx.Done():
			return
		}
	}
}
