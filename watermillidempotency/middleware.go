package watermillidempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	watermillv1 "github.com/grpc-idempotency/idempotency/watermillidempotency/internal/gen/idempotency/watermill/v1"
)

// Action is what the middleware told the router about a delivery.
type Action int

// The actions of a delivery.
const (
	// Ack: the work is done (now or before) and its outcome stored, or
	// the store failed to take it until the store timeout (decision 270);
	// the handler's messages were returned, for the router to publish
	// before it acks.
	Ack Action = iota + 1
	// Nack: an error was returned at once, so the router nacks and the
	// message is redelivered; the handler runs again.
	Nack
	// NackAfterDelay: an error was returned after the retry delay; the
	// key was in flight, or the store could not be used.
	NackAfterDelay
	// DeadLetter: the outcome is final but not a success; the message was
	// handed to the dead-letter function, if any, and nothing was
	// returned, so the router acks.
	DeadLetter
)

// String returns "ack", "nack", "nack after delay" or "dead letter".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Nack:
		return "nack"
	case NackAfterDelay:
		return "nack after delay"
	case DeadLetter:
		return "dead letter"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Result is what became of one delivery.
type Result struct {
	// Message is the delivered message.
	Message *message.Message
	// Operation is the operation its key was claimed under.
	Operation string
	// Key is its idempotency key ("" when it had none).
	Key string
	// Ran reports whether this delivery ran the handler.
	Ran bool
	// Produced is the handler's messages returned to the router: the run's,
	// or the stored ones on a replay.
	Produced []*message.Message
	// Err is the handler's or [idempotency.Do]'s error, or the dead-letter
	// function's; nil when the work is done.
	Err error
	// Settlement is what the outcome calls for
	// ([idempotency.Server.Settle]).
	Settlement idempotency.Settlement
	// Action is how the delivery was settled.
	Action Action
}

// ErrHandlerPanicked is the error of a delivery whose handler panicked.
// The panic is recovered: the claim is released and the error returned,
// so the router nacks, as after a retryable error.
var ErrHandlerPanicked = errors.New("watermillidempotency: the handler panicked")

// ErrNoOperation is the error of a message delivered outside a router's
// handler (no handler name in its context) to a middleware without
// [WithOperation]. It is returned, so the message is nacked, not lost.
var ErrNoOperation = errors.New("watermillidempotency: no operation: the message is not delivered by a router's handler, and WithOperation is not set")

// Middleware returns a router middleware that runs each message's handler
// once per key under its operation, with server's store, and settles the
// delivery by [idempotency.Server.Settle] (see the package documentation).
// Add it to a router (router.AddMiddleware) or to one handler
// (handler.AddMiddleware). Put watermill's middleware.Retry after it, so
// that the handler's retries run under one claim, and middleware.Recoverer
// is not needed for the handler: a panic is recovered here. It panics when
// server is nil or an option is invalid.
func Middleware(server *idempotency.Server, opts ...Option) message.HandlerMiddleware {
	if server == nil {
		panic("watermillidempotency: Middleware: the idempotency server is nil")
	}
	cfg := config{key: UUIDKey, results: func(Result) {}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retryDelay == 0 {
		cfg.retryDelay = server.RetryAfter()
	}
	m := &middleware{server: server, cfg: cfg}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			r := m.process(msg, h)
			m.cfg.results(r)
			if r.Action == Ack {
				return r.Produced, nil
			}
			if r.Action == DeadLetter {
				return nil, nil
			}
			return nil, r.Err
		}
	}
}

type middleware struct {
	server *idempotency.Server
	cfg    config
}

// process runs h once per key for one delivery and decides its Action.
func (m *middleware) process(msg *message.Message, h message.HandlerFunc) Result {
	r := Result{Message: msg, Operation: m.cfg.op}
	if r.Operation == "" {
		r.Operation = message.HandlerNameFromCtx(msg.Context())
	}
	if r.Operation == "" {
		r.Err, r.Settlement, r.Action = ErrNoOperation, idempotency.SettleRetry, Nack
		return r
	}
	key, err := m.cfg.key(msg)
	if err != nil {
		r.Err = fmt.Errorf("%w: watermillidempotency: the message has no key: %w", idempotency.ErrKeyMissing, err)
		r.Settlement = m.server.Settle(false, false, r.Err)
		return m.settle(msg, r)
	}
	r.Key = key
	// The payload is the request the key stands for: a key reused for
	// another payload is refused with ErrKeyReused instead of being skipped.
	orig := msg.Context()
	out, replayed, err := idempotency.Do(orig, m.server, r.Operation, key, wrapperspb.Bytes(msg.Payload),
		func(ctx context.Context) (*watermillv1.Produced, error) {
			r.Ran = true
			// The handler reads its context from the message: give it the
			// claimed run's (the claim, the handler timeout, the lease's
			// loss), with the message context's values.
			msg.SetContext(ctx)
			defer msg.SetContext(orig)
			produced, err := run(h, msg)
			if err != nil {
				return nil, err
			}
			r.Produced = produced
			return encode(produced), nil
		})
	r.Err = err
	r.Settlement = m.server.Settle(r.Ran, replayed, err)
	if r.Settlement == idempotency.SettleAck && !r.Ran {
		r.Produced = decode(out) // the stored messages, published again
	}
	return m.settle(msg, r)
}

// settle turns r's Settlement into its Action.
func (m *middleware) settle(msg *message.Message, r Result) Result {
	switch r.Settlement {
	case idempotency.SettleAck:
		r.Action = Ack
	case idempotency.SettleRetry:
		r.Action = Nack
	case idempotency.SettleRetryLater:
		r.Action = NackAfterDelay
		t := time.NewTimer(m.cfg.retryDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-msg.Context().Done():
		}
	default: // SettleReject: final
		r.Action = DeadLetter
		if m.cfg.deadLetter != nil {
			if err := m.cfg.deadLetter(msg, r.Err); err != nil {
				r.Err, r.Action = fmt.Errorf("watermillidempotency: the dead-letter function failed: %w", err), Nack
			}
		}
	}
	return r
}

// run calls the handler, turning a panic into [ErrHandlerPanicked].
func run(h message.HandlerFunc, msg *message.Message) (produced []*message.Message, err error) {
	defer func() {
		if v := recover(); v != nil {
			produced, err = nil, fmt.Errorf("%w: %v", ErrHandlerPanicked, v)
		}
	}()
	return h(msg)
}
