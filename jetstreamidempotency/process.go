package jetstreamidempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
)

// Action is what the Processor told JetStream about a delivery.
type Action int

// The actions of a delivery.
const (
	// Ack: the work is done (now or before) and its outcome stored, or
	// the store failed to take it until the store timeout (decision 270);
	// or, with [WithAckStoredErrors], its stored error is final.
	Ack Action = iota + 1
	// Nak: redeliver now; the handler runs again.
	Nak
	// NakWithDelay: redeliver after the retry delay; the key was in
	// flight, or the store could not be used.
	NakWithDelay
	// Term: never redeliver; the message failed for good.
	Term
)

// String returns "ack", "nak", "nak with delay" or "term".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Nak:
		return "nak"
	case NakWithDelay:
		return "nak with delay"
	case Term:
		return "term"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Result is what became of one delivery.
type Result struct {
	// Key is the message's idempotency key ("" when it had none).
	Key string
	// Delivery is JetStream's delivery count of the message: 1 for the
	// first delivery, more for a redelivery.
	Delivery uint64
	// Ran reports whether this delivery ran the handler.
	Ran bool
	// Err is the handler's or [idempotency.Do]'s error; nil when the work
	// is done.
	Err error
	// Settlement is what the outcome calls for
	// ([idempotency.Server.Settle]).
	Settlement idempotency.Settlement
	// Action is how the message was settled.
	Action Action
	// SettleErr is the error of the Ack, Nak or Term (a connection that is
	// gone, an ack that was not confirmed): JetStream then redelivers the
	// message after AckWait, and the redelivery finds its outcome stored.
	SettleErr error
}

// ErrHandlerPanicked is the error of a delivery whose handler panicked.
// The panic is recovered: the claim is released and the message nakked,
// as for a retryable error, and the Processor goes on with the next
// message. Set the consumer's MaxDeliver to bound the redeliveries of a
// message that always panics.
var ErrHandlerPanicked = errors.New("jetstreamidempotency: the handler panicked")

// process runs the handler once per key for one delivery and settles it.
// progress is the InProgress interval (negative: none).
func (p *Processor) process(ctx context.Context, msg jetstream.Msg, progress time.Duration) Result {
	var r Result
	if md, err := msg.Metadata(); err == nil {
		r.Delivery = md.NumDelivered
	}
	key, err := p.cfg.key(msg)
	if err != nil {
		r.Err = fmt.Errorf("%w: jetstreamidempotency: the message has no key: %w", idempotency.ErrKeyMissing, err)
		return p.settle(ctx, msg, r, false)
	}
	r.Key = key
	// The body is the request the key stands for: an id reused for another
	// body is refused with ErrKeyReused instead of being skipped. Do with an
	// empty response is Once (they share their records), and it also says
	// whether its answer is a stored outcome.
	_, replayed, err := idempotency.Do(ctx, p.server, p.op, r.Key, wrapperspb.Bytes(msg.Data()),
		func(ctx context.Context) (*emptypb.Empty, error) {
			r.Ran = true
			defer keepInProgress(ctx, msg, progress)()
			return &emptypb.Empty{}, p.run(ctx, msg)
		})
	r.Err = err
	return p.settle(ctx, msg, r, replayed)
}

// run calls the handler, turning a panic into [ErrHandlerPanicked].
func (p *Processor) run(ctx context.Context, msg jetstream.Msg) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanicked, v)
		}
	}()
	return p.handler(ctx, msg)
}

// settle tells JetStream what [idempotency.Server.Settle] says of the
// delivery, and reports r. replayed reports that r.Err is a stored
// outcome.
func (p *Processor) settle(ctx context.Context, msg jetstream.Msg, r Result, replayed bool) Result {
	r.Settlement = p.server.Settle(r.Ran, replayed, r.Err)
	switch r.Settlement {
	case idempotency.SettleAck:
		r.Action = Ack
	case idempotency.SettleRetry:
		r.Action = Nak
	case idempotency.SettleRetryLater:
		r.Action = NakWithDelay
	default:
		// The handler's stored error, on the delivery that ran it or
		// replayed, is acked with WithAckStoredErrors; anything else that
		// no redelivery can help (no key, a reused key, a corrupt record)
		// is terminated.
		stored := (r.Ran || replayed) && !errors.Is(r.Err, idempotency.ErrRecordCorrupt)
		r.Action = Term
		if stored && p.cfg.ackStored {
			r.Action = Ack
		}
	}
	switch r.Action {
	case Ack: // confirmed by the server, so a Result of Ack means acknowledged
		r.SettleErr = msg.DoubleAck(context.WithoutCancel(ctx))
	case Nak:
		r.SettleErr = msg.Nak()
	case NakWithDelay:
		r.SettleErr = msg.NakWithDelay(p.cfg.retryDelay)
	case Term:
		if p.cfg.conn != nil && termReasons(p.cfg.conn.ConnectedServerVersion()) {
			r.SettleErr = msg.TermWithReason(r.Err.Error())
		} else {
			r.SettleErr = msg.Term()
		}
	}
	p.cfg.results(r)
	return r
}

// keepInProgress sends InProgress for msg every interval until ctx ends
// (the claim's lease was lost) or the returned stop is called; stop
// returns once no InProgress can be sent any more. A negative interval
// sends none. It runs on a timer, not a goroutine of its own: most
// handlers return long before the first InProgress is due.
func keepInProgress(ctx context.Context, msg jetstream.Msg, every time.Duration) (stop func()) {
	if every < 0 {
		return func() {}
	}
	var mu sync.Mutex // held while an InProgress is sent
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		_ = msg.InProgress() // a lost one only shortens the message's hold
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
