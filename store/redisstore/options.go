package redisstore

import (
	"fmt"
	"time"
)

// DefaultPrefix is the key prefix a [Store] uses unless [WithPrefix] says
// otherwise.
const DefaultPrefix = "idempotency:"

// Option configures a [Store] built by [New].
type Option func(*config)

type config struct {
	prefix      string
	pipelining  bool
	minReplicas int
	waitTimeout time.Duration
}

func newConfig(opts []Option) config {
	c := config{prefix: DefaultPrefix, pipelining: true}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithPrefix sets the prefix put before every key the store writes, so
// several stores (or other data) can share one Redis. Default
// [DefaultPrefix] ("idempotency:"). In a Redis Cluster, a prefix with a
// hash tag such as "{idempotency}:" would put every key in one slot and on
// one node; leave hash tags out so keys spread over the cluster.
//
// [Store.List] and [Store.Stats] take as the store's the keys under the
// prefix with no ':' after it (the store keys the server derives are
// base64url), so two stores on one Redis keep their listings apart when
// one's prefix extends the other's with a ':' in the part it adds:
// "idempotency:" and "idempotency:orders:" do; "app" and "apps" do not,
// and each of those would list and count the other's entries.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithoutPipelining sends each store call in a round trip of its own, from
// its caller's goroutine, instead of sharing round trips between
// concurrent calls (see Shared round trips in the package documentation).
// Pipelining is on by default. Turn it off to compare, or when something
// between the store and Redis handles pipelines badly.
func WithoutPipelining() Option {
	return func(c *config) { c.pipelining = false }
}

// WithMinReplicas makes every claim and every completion wait until at
// least n replicas of the master that took it have acknowledged it, or
// timeout has passed: the store sends WAIT n timeout after the write, in
// the same round trip and on the same connection. A claim or completion
// that fewer than n replicas acknowledged in time fails with an error
// wrapping [ErrTooFewReplicas], which the interceptor treats as a store
// failure (see Replica acknowledgement in the package documentation for
// what this does and does not promise). Default: off (n = 0), no WAIT.
//
// timeout must be positive (WAIT with 0 blocks for ever) and below the
// client's ReadTimeout (5 s by default), which bounds the round trip the
// WAIT is part of. New panics on n < 0 or timeout <= 0, and on a timeout
// at or above the ReadTimeout of a client whose options it can read.
func WithMinReplicas(n int, timeout time.Duration) Option {
	return func(c *config) {
		if n < 0 || (n > 0 && timeout <= 0) {
			panic(fmt.Sprintf("redisstore: WithMinReplicas(%d, %v): n must be at least 0 and the timeout positive", n, timeout))
		}
		c.minReplicas, c.waitTimeout = n, timeout
	}
}
