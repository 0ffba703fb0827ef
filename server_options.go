package idempotency

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Defaults and bounds of the server options, which each option's doc
// comment states.
const (
	defaultRetention = 24 * time.Hour
	minRetention     = time.Hour
	// maxRetention is the longest retention, ten years (87600h): longer
	// ones, from any source (an option, a proto option, whose durations
	// over about 292 years come out as math.MaxInt64, or a
	// [MethodPolicy]), are lowered to it.
	maxRetention = 87600 * time.Hour
	defaultLease = 60 * time.Second
	// minLease is the shortest lease: renewal runs every lease/3 and retries
	// a failed renewal until the lease would run out, which needs room for
	// store round trips and scheduling delays. Shorter leases are raised to
	// it.
	minLease = 100 * time.Millisecond
	// maxLease is the longest lease, a day: a server that dies holding a
	// claim blocks its key for at most that long. Longer leases, from any
	// source, are lowered to it.
	maxLease = 24 * time.Hour
	// defaultHandlerTimeout bounds a claimed handler whose caller has gone;
	// see [WithHandlerTimeout].
	defaultHandlerTimeout   = time.Minute
	defaultMaxResponseBytes = 4 << 20
	// defaultMaxStreamRequestBytes bounds the requests of a keyed
	// client-streaming or server-streaming call; see
	// [WithMaxStreamRequestBytes].
	defaultMaxStreamRequestBytes = 4 << 20
	defaultRetryAfter            = time.Second
	// defaultStoreTimeout bounds every store call; see [WithStoreTimeout].
	defaultStoreTimeout = 10 * time.Second
)

// DefaultStoredCodes are the error codes a handler's error is stored and
// replayed for by default: the outcome would be the same on a retry. A
// server copies it when it is built. To add a code, give a server
// WithStoredCodes(append(slices.Clone(DefaultStoredCodes), codes.DataLoss)...)
// rather than changing it in place.
var DefaultStoredCodes = []codes.Code{
	codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
	codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented,
}

type config struct {
	sharedConfig
	scope            func(context.Context) (string, error)
	retention        time.Duration
	lease            time.Duration
	wait             time.Duration
	failOpen         bool
	maxResponseBytes int
	maxStreamRequest int // bytes of a keyed stream's requests
	storedCodes      [17]bool
	fingerprint      FingerprintFunc // nil: Fingerprint, computed into the call's own array
	methods          map[string]MethodPolicy
	ops              map[string]MethodPolicy // of Do and Once, by operation
	observer         Observer
	files            *protoregistry.Files
	retryAfter       time.Duration
	storeTimeout     time.Duration
	handlerTimeout   time.Duration
	cancellation     Cancellation
	abandoned        AbandonPolicy      // WithAbandonedClaims: AbandonRerun or AbandonBlock
	cache            *replayCacheConfig // nil: no replay cache
	sealing          *Sealing           // nil: records are stored as they are
}

func newConfig(opts []ServerOption) *config {
	c := &config{
		sharedConfig:     sharedConfig{metadataKey: MetadataKey, defaultMode: ModeOptional},
		retention:        defaultRetention,
		lease:            defaultLease,
		maxResponseBytes: defaultMaxResponseBytes,
		maxStreamRequest: defaultMaxStreamRequestBytes,
		observer:         nopObserver{},
		files:            protoregistry.GlobalFiles,
		retryAfter:       defaultRetryAfter,
		storeTimeout:     defaultStoreTimeout,
		handlerTimeout:   defaultHandlerTimeout,
		cancellation:     CancellationDetached,
		abandoned:        AbandonRerun,
	}
	WithStoredCodes(DefaultStoredCodes...).applyToServer(c)
	for _, o := range opts {
		o.applyToServer(c)
	}
	return c
}

// positive records an error of option unless d is positive.
func (c *config) positive(option, what string, d time.Duration) {
	if d <= 0 {
		c.invalid(option, "%s must be positive, got %v", what, d)
	}
}

// notNegative records an error of option when d is negative.
func (c *config) notNegative(option, what string, d time.Duration) {
	if d < 0 {
		c.invalid(option, "%s must not be negative, got %v", what, d)
	}
}

// WithScope sets the function that returns the caller's scope, for example
// the authenticated principal or tenant. Keys are namespaced by scope, so
// one caller can never read another caller's answer by sending the same key.
// The interceptors return an error from scope to the caller as is when it
// is a gRPC status, and as INTERNAL otherwise; [Do] returns it wrapped.
// Default: every caller shares the empty scope.
func WithScope(scope func(context.Context) (string, error)) ServerOption {
	return serverOptionFunc(func(c *config) { c.scope = scope })
}

// WithRetention keeps completed outcomes for d, for methods whose proto
// option or [WithMethodPolicy] does not say. Default 24h; values below 1h
// are raised to it, values above 87600h (ten years) lowered to it, from
// any source (an option, a proto option, a [MethodPolicy]); zero or
// negative makes [UnaryServerInterceptor] panic.
func WithRetention(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.positive("WithRetention", "retention", d)
		c.retention = d
	})
}

// WithLease sets how long an in-flight claim lives without renewal, for
// methods whose proto option or [WithMethodPolicy] does not say. The lease
// is renewed every d/3 while the handler runs and until its outcome is
// stored, so d bounds how long a crashed server blocks a key, not how long a
// handler may run. Default 60s; values below 100ms are raised to it,
// values above 24h lowered to it, from any source; zero or negative makes
// [UnaryServerInterceptor] panic.
func WithLease(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.positive("WithLease", "lease", d)
		c.lease = d
	})
}

// WithWaitForInFlight makes a duplicate that finds its key in flight wait up
// to d (and never past its own deadline) for the original's outcome and
// replay it, instead of failing at once with ABORTED. Waiters in the same
// process are woken the moment the original finishes; waiters elsewhere
// poll the store with backoff. Default 0: reject at once. A negative d
// makes [UnaryServerInterceptor] panic.
func WithWaitForInFlight(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.notNegative("WithWaitForInFlight", "wait", d)
		c.wait = d
	})
}

// WithFailOpen runs the handler without deduplication when the store
// cannot be reached, and reports [DecisionFailOpen] to the observer.
// Default: fail closed with UNAVAILABLE and [ErrStoreUnavailable].
func WithFailOpen() ServerOption {
	return serverOptionFunc(func(c *config) { c.failOpen = true })
}

// WithStoredCodes replaces the set of error codes whose errors are stored
// and replayed. Errors with any other code release the claim, so a retry
// runs the handler again. Default [DefaultStoredCodes].
//
// [UnaryServerInterceptor] panics when cs holds codes.OK or a code outside
// 1..16, or UNAVAILABLE or ABORTED: the codes the retry protocol uses
// (store unavailable, key in use), which clients retry, so a stored one
// would replay a temporary failure to every retry for the whole retention.
func WithStoredCodes(cs ...codes.Code) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.storedCodes = [17]bool{}
		for _, code := range cs {
			switch {
			case code == codes.OK || int(code) >= len(c.storedCodes):
				c.invalid("WithStoredCodes", "%v is not an error code (want 1..16)", code)
			case code == codes.Unavailable || code == codes.Aborted:
				c.invalid("WithStoredCodes", "%v is a code the retry protocol uses: a stored one would be replayed to every retry", code)
			default:
				c.storedCodes[code] = true
			}
		}
	})
}

// WithFingerprint replaces the request fingerprint, for example to leave
// out volatile fields such as a client timestamp. An error from f fails
// the call before the store is touched: INTERNAL from the interceptors,
// wrapped from [Do]. Default [Fingerprint]. With [WithSealing], any f,
// even one that returns Fingerprint's fingerprint, keys requests apart
// from the default: servers sharing a store and keys need the same f.
// A nil f makes [UnaryServerInterceptor] panic.
func WithFingerprint(f FingerprintFunc) ServerOption {
	return serverOptionFunc(func(c *config) {
		if f == nil {
			c.invalid("WithFingerprint", "fingerprint function must not be nil")
		}
		c.fingerprint = f
	})
}

// WithMethodPolicy sets the policy of one method (full name,
// "/pkg.Service/Method"), overriding its proto options field by field: the
// zero value of a field keeps what the proto says. Default: the proto
// options alone. Naming a method of gRPC's own services (proto package
// "grpc" or "grpc.*"), which the interceptor otherwise leaves alone, makes
// it take part.
//
// [NewServer] checks the policy of every method named here when it is
// built, and panics with a [*MethodConfigError] naming the method and its
// proto file when it cannot work: a KeyField (or the proto's key_field)
// that is not a singular string field of the request, or a bidirectional
// streaming method. A name the descriptor registry ([WithDescriptors])
// does not have is accepted and applied when the method is called; its
// KeyField is checked against the first request, and a bad one fails the
// method's calls closed. [Server.Validate] reports names a server does not
// serve. A negative Lease, Retention or HandlerTimeout, a Mode,
// Cancellation or Abandoned that is none of their constants, or an
// Abandoned of [AbandonRecover] without a Recover (or a Recover beside
// another Abandoned), makes it panic too, naming the method.
func WithMethodPolicy(fullMethod string, p MethodPolicy) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.checkPolicy("WithMethodPolicy", fullMethod, p)
		if c.methods == nil {
			c.methods = make(map[string]MethodPolicy)
		}
		c.methods[fullMethod] = p
	})
}

// checkPolicy records an error of option when a field of p, the policy of
// name, holds a value no setting has: a negative duration, a Mode or
// Cancellation beyond its constants, or an abandon policy that cannot
// work ([config.checkAbandoned]).
func (c *config) checkPolicy(option, name string, p MethodPolicy) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Lease", p.Lease}, {"Retention", p.Retention}, {"HandlerTimeout", p.HandlerTimeout}} {
		if f.d < 0 {
			c.invalid(option, "%s: %s must not be negative, got %v", name, f.name, f.d)
		}
	}
	if p.Mode < ModeUnspecified || p.Mode > ModeDisabled {
		c.invalid(option, "%s: Mode must be one of the Mode constants, got Mode(%d)", name, int(p.Mode))
	}
	if p.Cancellation < CancellationUnspecified || p.Cancellation > CancellationCaller {
		c.invalid(option, "%s: Cancellation must be one of the Cancellation constants, got Cancellation(%d)", name, int(p.Cancellation))
	}
	if strings.HasPrefix(p.Namespace, "/") {
		c.invalid(option, "%s: Namespace %q must not start with \"/\": a namespace is an operation, and a name that starts with \"/\" is a gRPC method's (ValidateOperation)", name, p.Namespace)
	}
	c.checkAbandoned(option, name, p)
}

// WithObserver sets the observer told of every decision. Default: none.
func WithObserver(o Observer) ServerOption {
	return serverOptionFunc(func(c *config) {
		if o != nil {
			c.observer = o
		}
	})
}

// WithDescriptors resolves method options from files instead of
// protoregistry.GlobalFiles, for example a registry built with
// protodesc.NewFiles from a descriptor set. Key fields are looked up on each
// request's own descriptor, and a replayed response whose type has no
// generated Go type linked in is decoded into a dynamicpb message of the
// descriptor files holds, so files need not hold the generated types.
// Default protoregistry.GlobalFiles. A nil files makes [NewServer] panic.
func WithDescriptors(files *protoregistry.Files) ServerOption {
	return serverOptionFunc(func(c *config) {
		if files == nil {
			c.invalid("WithDescriptors", "descriptor registry must not be nil")
		}
		c.files = files
	})
}

// WithOperationPolicy sets the policy of the work [Do] and [Once] run
// under op: Retention, Lease, Cancellation, HandlerTimeout and Abandoned
// (with Recover), each overriding the server-wide setting when set. Default: the server-wide
// settings. An operation is not a method: [Server.Validate] does not look
// for it among the methods a server serves.
//
// It panics, naming op, on an empty op or one that starts with "/"
// ([ValidateOperation]), a negative duration, a
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
		case strings.HasPrefix(op, "/"):
			c.invalid(option, "%s", operationProblem(op))
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

// WithSealing seals every outcome the server stores with AES-256-GCM,
// under a key derived per scope from s's keyring and bound to the record's
// store key, and keys every request fingerprint with HMAC-SHA256: whoever
// reads the store reads no answer and can test no guess of a request, and
// a record edited, moved to another key or to another scope is refused as
// corrupt (INTERNAL, [ErrRecordCorrupt]), never replayed. Records written
// without sealing still replay unless [Sealing.RequireSealed]; keys rotate
// through the [Keyring]. Servers sharing a store and keys must share
// their [WithFingerprint] choice: under sealing a custom function keys
// requests apart from the default. What it guards and what it does not is
// in [the security model]. Without it, records are stored as they are. It
// panics when s has neither Keys nor TenantKeys.
//
// [the security model]: https://github.com/grpc-idempotency/idempotency/blob/main/SECURITY.md#sealed-records
func WithSealing(s Sealing) ServerOption {
	return serverOptionFunc(func(c *config) {
		switch {
		case s.Keys == nil && s.TenantKeys == nil:
			c.invalid("WithSealing", "Sealing.Keys or Sealing.TenantKeys is required")
		case s.Keys != nil && s.Keys.primary.ID == "":
			c.invalid("WithSealing", "Sealing.Keys is a Keyring not made by NewKeyring")
		}
		c.sealing = &s
	})
}
