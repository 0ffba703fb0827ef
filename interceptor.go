package idempotency

import (
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency/store"
)

// Server is the idempotency side of a gRPC server, built once with
// [NewServer] from a store and the options: its interceptor, its start-up
// check ([Server.Validate]) and the functions [Do] and [Once] read the same
// options and run the same protocol, so they cannot drift apart.
type Server struct {
	e *engine
	// streams is set once StreamServerInterceptor is called: Validate then
	// knows the server's streaming methods are intercepted.
	streams atomic.Bool
}

// NewServer returns the idempotency server over store s, configured by
// opts.
//
// It panics when the options are invalid or the policy of a method named
// by [WithMethodPolicy] cannot work (see [MethodConfigError]): programming
// errors, found at start-up. It checks only those methods, since it cannot
// know which services the gRPC server will register; a method whose proto
// option cannot work fails its calls closed instead. Check them all at
// start-up with [Server.Validate].
func NewServer(s store.Store, opts ...ServerOption) *Server {
	e, err := newEngine(s, opts)
	if err != nil {
		panic(err)
	}
	e.followPurges()
	return &Server{e: e}
}

// Close ends what s runs in the background: the subscription through
// which its replay cache ([WithReplayCache]) hears of the keys purged from
// the store ([store.Invalidator]), by any server or operator. It waits
// for the subscription to end, and empties the cache for good: s goes on
// answering calls, from the store, since a cache that no purge reaches
// would replay a purged key for up to its ttl. A Server without a replay
// cache, or over a store that cannot tell purges, has nothing to close.
// Close is safe to call more than once, and returns nil. A Server
// dropped without Close ends its subscription once the garbage collector
// has reclaimed it and every interceptor and function built from it.
func (s *Server) Close() error {
	s.e.close()
	return nil
}

// UnaryServerInterceptor returns the server interceptor that runs each
// keyed call once per key and replays its stored outcome to every retry:
// it reads the key from the request metadata ([MetadataKey]), claims it in
// the store, runs the handler, and stores its response or deterministic
// error for the retention. A method's policy comes from its proto option,
// [WithMethodPolicy] or [WithDefaultMode]; NO_SIDE_EFFECTS methods and
// gRPC's own services pass through. Every interceptor s returns shares its
// method cache and in-flight waiters with [Do] and [Once]. What it does in
// every situation is in [the behaviour contract].
//
// [the behaviour contract]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/semantics/README.md#server-situation--outcome
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return s.e.intercept
}

// StreamServerInterceptor returns the server interceptor that runs each
// keyed client-streaming or server-streaming call once per key, with the
// same store, options and method policies as [Server.UnaryServerInterceptor].
// A keyed call's requests are read and fingerprinted before the handler
// runs, up to [WithMaxStreamRequestBytes]; a client stream's response is
// stored as a unary one's, a server stream's messages in order, and a
// retry may ask for those after the first N ([ResumeAfterKey]).
// Bidirectional streams pass through. Calling it tells [Server.Validate]
// that the server intercepts streams: build the interceptors before
// calling Validate. The rest is in [the streaming guide].
//
// [the streaming guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/streaming.md
func (s *Server) StreamServerInterceptor() grpc.StreamServerInterceptor {
	s.streams.Store(true)
	return s.e.interceptStream
}

// UnaryServerInterceptor is shorthand for
// NewServer(s, opts...).UnaryServerInterceptor(), for a server whose one
// idempotency entry point is this interceptor. It panics as [NewServer]
// does. Each call builds a server of its own, with its own in-flight
// waiters and replay cache: a server that also intercepts streams, calls
// [Do] or [Once], or runs the start-up check [Server.Validate] builds one
// [Server] with [NewServer] and takes everything from it.
func UnaryServerInterceptor(s store.Store, opts ...ServerOption) grpc.UnaryServerInterceptor {
	return NewServer(s, opts...).UnaryServerInterceptor()
}

// StoresError reports whether err, returned by a handler or by the
// function of [Do] or [Once], is kept as the call's outcome: a gRPC status
// whose code is one of [WithStoredCodes]. Such an error is replayed to
// every retry for the retention; any other error releases the claim, so a
// retry runs the work again. A message consumer uses it to settle the
// delivery that ran its handler: a stored error is final at once, any
// other is redelivered. A nil err is a response, not an error: false.
func (s *Server) StoresError(err error) bool {
	return err != nil && s.e.keeps(err)
}

// RetryAfter returns the delay s asks a client to wait before retrying a
// key in flight or a store that is down or full: [WithRetryAfter], by
// default 1 s. The interceptors send it as
// google.rpc.RetryInfo and grpc-retry-pushback-ms; [Do] returns bare
// sentinels, so an entry point built on it that answers in another
// protocol reads the delay here (httpidempotency sends it as the
// Retry-After header of its 409 and 503 answers).
func (s *Server) RetryAfter() time.Duration { return s.e.cfg.retryAfter }
