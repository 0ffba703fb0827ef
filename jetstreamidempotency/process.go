package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
)

// Action is what the Processor told JetStream about a delivery.
type Action int

// The settlements of a delivery.
const (
	// Ack: the work is done (now or before) and its outcome stored.
	Ack Action = iota + 1
	// Nak: redeliver now; the handler runs again.
	Nak
	// NakWithDelay: redeliver after the retry delay; the key was in
	// flight, or the store could not be used.
	NakWithDelay
	// Term: never redeliver; the message failed for good.
	Term
)

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
var ErrHandlerPanicked = errors.New("consumer: the handler panicked")

// process runs the handler once per key for one delivery and settles it.
// progress is the InProgress interval (negative: none).
func (p *Processor) process(ctx context.Context, msg jetstream.Msg, progress time.Duration) Result {
	var r Result
	if md, err := msg.Metadata(); err == nil {
		r.Delivery = md.NumDelivered
	}
	r.Key, r.Err = p.cfg.key(msg)
	if r.Err != nil {
		r.Err = fmt.Errorf("consumer: the message has no key: %w", r.Err)
		return p.settle(ctx, msg, r, Term)
	}
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
	return p.settle(ctx, msg, r, p.action(r, replayed))
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

// action returns how to settle a delivery whose Do returned r.Err;
// replayed reports that r.Err is a stored outcome.
//
// Only the idempotency server knows which handler errors it stores (its
// WithStoredCodes), so the Processor keeps no copy of its codes and asks
// it ([idempotency.Server.StoresError]): the error of a run that the
// server stores is final at once, as it is on every delivery that gets it
// back replayed; any other error of a run released the claim, and the
// redelivery runs the handler again.
func (p *Processor) action(r Result, replayed bool) Action {
	final := func() Action {
		if p.cfg.ackStored {
			return Ack
		}
		return Term
	}
	switch {
	case r.Err == nil:
		return Ack
	case r.Ran && p.server.StoresError(r.Err):
		// The handler's deterministic error, stored for every delivery.
		return final()
	case r.Ran: // a retryable error, or a panic: the claim was released
		return Nak
	case replayed && !errors.Is(r.Err, idempotency.ErrRecordCorrupt):
		// The handler's deterministic error, stored: every delivery gets
		// it, whatever it carries (even another service's ErrorInfo).
		return final()
	}
	switch idempotency.Reason(r.Err) {
	case idempotency.ReasonKeyInUse, idempotency.ReasonStoreUnavailable, idempotency.ReasonStoreFull:
		return NakWithDelay
	case "": // ctx ended before the handler started
		return Nak
	default: // the key reused for another body, a corrupt record: no redelivery helps
		return Term
	}
}

// settle tells JetStream what became of the delivery and reports r.
func (p *Processor) settle(ctx context.Context, msg jetstream.Msg, r Result, a Action) Result {
	r.Action = a
	switch a {
	case Ack: // confirmed by the server, so a Result of Ack means acknowledged
		r.SettleErr = msg.DoubleAck(context.WithoutCancel(ctx))
	case Nak:
		r.SettleErr = msg.Nak()
	case NakWithDelay:
		r.SettleErr = msg.NakWithDelay(p.cfg.retryDelay)
	case Term:
		r.SettleErr = msg.TermWithReason(r.Err.Error())
	}
	p.cfg.results(r)
	return r
}

// keepInProgress sends InProgress for msg every interval until ctx ends
// (the claim's lease was lost) or the returned stop is called; stop
// returns once no InProgress can be sent any more. A negative interval
// sends none.
func keepInProgress(ctx context.Context, msg jetstream.Msg, every time.Duration) (stop func()) {
	if every < 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress() // a lost one only shortens the message's hold
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
