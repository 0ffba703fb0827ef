package idempotency

// WithDefaultMode sets the mode of the methods that neither an
// idempotency.v1.method option nor [WithMethodPolicy] gives one:
// [ModeOptional] (the default) deduplicates their calls that carry a key,
// [ModeRequired] refuses their calls without one, and [ModeDisabled]
// leaves them untouched, so that only annotated methods take part. A
// method marked idempotency_level = NO_SIDE_EFFECTS stays disabled
// whatever the default, and so do gRPC's own services (every service whose
// proto package is "grpc" or starts with "grpc.": health, reflection,
// channelz, lb) unless [WithMethodPolicy] names the method. Any other mode
// makes [UnaryServerInterceptor] panic. Default [ModeOptional].
func WithDefaultMode(mode Mode) Option {
	return func(c *config) {
		if !defaultable(mode) {
			c.invalid("WithDefaultMode", "mode must be ModeOptional, ModeRequired or ModeDisabled, got Mode(%d)", int(mode))
		}
		c.defaultMode = mode
	}
}

// WithClientDefaultMode sets whether [UnaryClientInterceptor] keys and
// retries the methods whose descriptor in protoregistry.GlobalFiles has no
// idempotency.v1.method option and no idempotency_level =
// NO_SIDE_EFFECTS, or that the registry does not have: with
// [ModeDisabled] they get no key and no retries, as on a server built with
// [WithDefaultMode](ModeDisabled); with [ModeOptional] or [ModeRequired]
// they get both. Methods of gRPC's own services (proto package "grpc" or
// "grpc.*") never get a key. Any other mode makes [UnaryClientInterceptor]
// panic. Default [ModeOptional].
func WithClientDefaultMode(mode Mode) ClientOption {
	return func(c *clientConfig) {
		if !defaultable(mode) {
			c.invalid("WithClientDefaultMode", "mode must be ModeOptional, ModeRequired or ModeDisabled, got Mode(%d)", int(mode))
		}
		c.defaultMode = mode
	}
}

// defaultable reports whether a default mode can be mode.
func defaultable(mode Mode) bool {
	return mode == ModeOptional || mode == ModeRequired || mode == ModeDisabled
}
