package redisstore

// DefaultPrefix is the key prefix a [Store] uses unless [WithPrefix] says
// otherwise.
const DefaultPrefix = "idempotency:"

// Option configures a [Store] built by [New].
type Option func(*config)

type config struct {
	prefix string
}

func newConfig(opts []Option) config {
	c := config{prefix: DefaultPrefix}
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
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}
