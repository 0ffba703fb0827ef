package idempotency

// WithOperationPolicy sets the policy of the work [Do] and [Once] run
// under op: Retention, Lease, Cancellation and HandlerTimeout, each
// overriding the server-wide setting when set. Default: the server-wide
// settings. An operation is not a method: [Server.Validate] does not look
// for it among the methods a server serves.
//
// It panics, naming op, on an empty op, a negative duration, a
// Cancellation that is none of its constants, and on the
// fields that mean nothing for an operation: Mode (the work always runs
// under a key), KeyField (the key is an argument) and Namespace (op is the
// namespace).
func WithOperationPolicy(op string, p MethodPolicy) ServerOption {
	return serverOptionFunc(func(c *config) {
		const option = "WithOperationPolicy"
		switch {
		case op == "":
			c.invalid(option, "the operation name must not be empty")
		case p.Mode != ModeUnspecified:
			c.invalid(option, "%s: Mode must be unset: Do and Once always run under a key", op)
		case p.KeyField != "":
			c.invalid(option, "%s: KeyField must be empty: Do and Once take the key as an argument", op)
		case p.Namespace != "":
			c.invalid(option, "%s: Namespace must be empty: the operation is its own namespace", op)
		}
		c.checkPolicy(option, op, p)
		if c.ops == nil {
			c.ops = make(map[string]MethodPolicy)
		}
		c.ops[op] = p
	})
}

// operations resolves the policy of every operation named by
// [WithOperationPolicy], and the one every other operation shares.
func (c *config) operations() (named map[string]*methodConfig, other *methodConfig) {
	build := func(p MethodPolicy) *methodConfig {
		m := c.defaults()
		m.mode = ModeRequired
		m.override(p)
		m.clamp()
		return m
	}
	named = make(map[string]*methodConfig, len(c.ops))
	for op, p := range c.ops {
		named[op] = build(p)
	}
	return named, build(MethodPolicy{})
}
