package idempotency

import (
	"context"
	"log/slog"
)

// slogMessage is the message of every record [NewSlogObserver] writes.
const slogMessage = "idempotency decision"

// NewSlogObserver returns an [Observer] that writes one record per
// decision to logger, with the message "idempotency decision" and these
// attributes, in this order:
//
//	method      the full method name, or the operation of Do and Once, when set
//	operation   [Event.Operation], when set
//	decision    the decision's String(): executed, replayed, in_flight, ...
//	store_key   [Event.StoreKey], when the call has one
//	key         [Event.Key], the client's key: only with [WithSlogClientKey]
//	store_time  [Event.StoreTime]
//	attempt     [Event.Attempt], when set (a store_error; the claim's
//	            attempt of a taken_over or recovered)
//	cached      true, for a replay from the replay cache
//	error       [Event.Err], when set
//
// The record is written with the observer's context, so a handler that
// reads the trace from it (or the caller's identity) adds it. Each
// decision has a level: Debug for lease_renewed; Info for the normal
// life of keys (executed, replayed, in_flight, released), for an
// operator's resolution (resolved) and for a
// client's malformed call (key_missing, key_invalid, stream_too_large,
// resume_invalid), answered as gRPC answers an invalid argument; Warn for
// a client that reuses a key with another request (key_reused), a failed
// store attempt (store_error, retried or failing the call closed), an
// outcome not retained (not_retained) and a claim of a dead server taken
// over (taken_over, recovered); Error for what the operations
// guide alerts on at once (lease_lost, record_corrupt, store_full,
// misconfigured, fail_open) and for a key that waits for an operator
// (blocked). A decision added to the library later is
// logged at Info. [WithSlogLevel] changes a decision's level; a level the
// logger does not enable costs one Enabled call. Group the attributes
// with logger.WithGroup("idempotency") if they would clash with yours.
// A purge ([DecisionPurged]) or a resolution ([DecisionResolved]) names
// no method and no operation: its record has neither attribute, only the
// store key.
//
// NewSlogObserver panics when logger is nil, naming itself, as every
// configuration error of the package does at construction.
func NewSlogObserver(logger *slog.Logger, opts ...SlogOption) Observer {
	if logger == nil {
		panic("idempotency: NewSlogObserver: logger must not be nil")
	}
	o := &slogObserver{logger: logger, levels: defaultSlogLevels}
	for _, opt := range opts {
		opt.applyToSlog(o)
	}
	return o
}

// SlogOption configures [NewSlogObserver].
type SlogOption interface {
	applyToSlog(*slogObserver)
}

type slogOptionFunc func(*slogObserver)

func (f slogOptionFunc) applyToSlog(o *slogObserver) { f(o) }

// WithSlogLevel logs the given decisions at level. Default: the levels
// [NewSlogObserver] lists. For example, WithSlogLevel(slog.LevelDebug,
// DecisionExecuted, DecisionReplayed) keeps the normal traffic out of an
// Info log.
func WithSlogLevel(level slog.Level, decisions ...Decision) SlogOption {
	return slogOptionFunc(func(o *slogObserver) {
		for _, d := range decisions {
			if d > 0 && int(d) < len(o.levels) {
				o.levels[d] = level
			} else {
				if o.others == nil {
					o.others = map[Decision]slog.Level{}
				}
				o.others[d] = level
			}
		}
	})
}

// WithSlogClientKey adds the client's idempotency key ([Event.Key]) to
// each record that has one, as the attribute "key". Default: left out,
// since a client's key is the client's data (an order number, a customer
// id, a message id) and may not belong in your logs; the store key
// names the call without it.
func WithSlogClientKey() SlogOption {
	return slogOptionFunc(func(o *slogObserver) { o.clientKey = true })
}

// defaultSlogLevels are the levels of [NewSlogObserver], by decision.
var defaultSlogLevels = [len(decisionNames)]slog.Level{
	DecisionExecuted: slog.LevelInfo, DecisionReplayed: slog.LevelInfo,
	DecisionInFlight: slog.LevelInfo, DecisionReleased: slog.LevelInfo,
	DecisionKeyMissing: slog.LevelInfo, DecisionKeyInvalid: slog.LevelInfo,
	DecisionStreamTooLarge: slog.LevelInfo, DecisionResumeInvalid: slog.LevelInfo,
	DecisionLeaseRenewed: slog.LevelDebug,
	DecisionKeyReused:    slog.LevelWarn, DecisionStoreError: slog.LevelWarn, DecisionNotRetained: slog.LevelWarn,
	DecisionLeaseLost: slog.LevelError, DecisionRecordCorrupt: slog.LevelError, DecisionStoreFull: slog.LevelError,
	DecisionMisconfigured: slog.LevelError, DecisionFailOpen: slog.LevelError,
	DecisionTakenOver: slog.LevelWarn, DecisionRecovered: slog.LevelWarn,
	DecisionBlocked: slog.LevelError, DecisionResolved: slog.LevelInfo,
}

type slogObserver struct {
	logger    *slog.Logger
	levels    [len(decisionNames)]slog.Level // by decision; a copy of defaultSlogLevels
	others    map[Decision]slog.Level        // of decisions this release does not know
	clientKey bool
}

func (o *slogObserver) level(d Decision) slog.Level {
	if d > 0 && int(d) < len(o.levels) {
		return o.levels[d]
	}
	if l, ok := o.others[d]; ok {
		return l
	}
	return slog.LevelInfo
}

// Observe implements [Observer].
func (o *slogObserver) Observe(ctx context.Context, e Event) {
	level := o.level(e.Decision)
	if !o.logger.Enabled(ctx, level) {
		return
	}
	var buf [9]slog.Attr
	attrs := buf[:0]
	// A purge names neither (a store key does not say which method it
	// is): an empty attribute would read as a method named "".
	if e.Method != "" {
		attrs = append(attrs, slog.String("method", e.Method))
	}
	if e.Operation != "" {
		attrs = append(attrs, slog.String("operation", e.Operation))
	}
	attrs = append(attrs, slog.String("decision", e.Decision.String()))
	if e.StoreKey != "" {
		attrs = append(attrs, slog.String("store_key", e.StoreKey))
	}
	if o.clientKey && e.Key != "" {
		attrs = append(attrs, slog.String("key", e.Key))
	}
	attrs = append(attrs, slog.Duration("store_time", e.StoreTime))
	if e.Attempt > 0 {
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	if e.Cached {
		attrs = append(attrs, slog.Bool("cached", true))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("error", e.Err))
	}
	o.logger.LogAttrs(ctx, level, slogMessage, attrs...)
}
