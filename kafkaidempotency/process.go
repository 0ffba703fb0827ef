package kafkaidempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
)

// Action is what the Processor did with a record after an attempt.
type Action int

// The actions of an attempt.
const (
	// Commit: the work is done (now or before) and its outcome stored, or
	// the store failed to take it until the store timeout (decision 270);
	// the record's offset is marked for commit.
	Commit Action = iota + 1
	// Retry: the record is tried again in place after Result.Delay, and
	// the partition's later records wait.
	Retry
	// DeadLetter: the record's outcome is final but not a success; it was
	// handed to the dead-letter function ([WithDeadLetter]), if any, and
	// its offset is marked for commit.
	DeadLetter
	// Abandon: the partition was revoked or lost, or Run ended, before the
	// record was settled; it is not committed, and the partition's next
	// owner gets it.
	Abandon
)

// String returns "commit", "retry", "dead letter" or "abandon".
func (a Action) String() string {
	switch a {
	case Commit:
		return "commit"
	case Retry:
		return "retry"
	case DeadLetter:
		return "dead letter"
	case Abandon:
		return "abandon"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Result is what became of one attempt at a record.
type Result struct {
	// Record is the record.
	Record *kgo.Record
	// Key is its idempotency key ("" when it had none).
	Key string
	// Attempt counts the attempts at the record in this member: 1 for
	// the first.
	Attempt int
	// Ran reports whether this attempt ran the handler.
	Ran bool
	// Err is the handler's or [idempotency.Do]'s error, or the dead-letter
	// function's; nil when the work is done.
	Err error
	// Settlement is what the outcome calls for
	// ([idempotency.Server.Settle]).
	Settlement idempotency.Settlement
	// Action is what the Processor did.
	Action Action
	// Delay is the wait before the next attempt, for Action Retry.
	Delay time.Duration
}

// ErrHandlerPanicked is the error of an attempt whose handler panicked.
// The panic is recovered: the claim is released and the record retried in
// place, as after a retryable error.
var ErrHandlerPanicked = errors.New("kafkaidempotency: the handler panicked")

// ErrAttemptsExhausted is wrapped, with the handler's last error, in the
// error a record is dead-lettered with after [WithMaxAttempts] failed runs.
var ErrAttemptsExhausted = errors.New("kafkaidempotency: the handler failed on every attempt")

// settle runs the record's attempts until it is settled for good (true:
// its offset may be marked) or the partition is stopped (false).
func (p *Processor) settle(part *partition, rec *kgo.Record) bool {
	failed := 0 // runs of the handler that failed with a retryable error
	for attempt := 1; ; attempt++ {
		if part.stopped() {
			p.cfg.results(Result{Record: rec, Attempt: attempt, Action: Abandon})
			return false
		}
		r := p.attempt(part.r.ctx, rec)
		r.Attempt = attempt
		if !r.Ran && part.r.ctx.Err() != nil { // Run is ending: nothing ran
			r.Action = Abandon
			p.cfg.results(r)
			return false
		}
		switch r.Settlement {
		case idempotency.SettleAck:
			r.Action = Commit
			p.cfg.results(r)
			return true
		case idempotency.SettleRetry: // the handler's retryable error, or a panic
			if failed++; failed >= p.cfg.maxAttempts {
				r.Err = fmt.Errorf("%w (%d runs): %w", ErrAttemptsExhausted, failed, r.Err)
				return p.deadLetter(part, r)
			}
			r.Delay = min(p.cfg.backoffMin<<(failed-1), p.cfg.backoffMax)
			if r.Delay <= 0 { // the shift overflowed
				r.Delay = p.cfg.backoffMax
			}
		case idempotency.SettleRetryLater:
			r.Delay = p.cfg.retryDelay
		default: // SettleReject
			return p.deadLetter(part, r)
		}
		if part.stopped() {
			r.Action = Abandon
			p.cfg.results(r)
			return false
		}
		r.Action = Retry
		p.cfg.results(r)
		if !part.sleep(r.Delay) {
			p.cfg.results(Result{Record: rec, Key: r.Key, Attempt: attempt + 1, Action: Abandon})
			return false
		}
	}
}

// deadLetter hands a final record to the dead-letter function until it
// takes it (true) or the partition is stopped (false).
func (p *Processor) deadLetter(part *partition, r Result) bool {
	for {
		if p.cfg.deadLetter == nil {
			r.Action = DeadLetter
			p.cfg.results(r)
			return true
		}
		err := p.cfg.deadLetter(part.r.ctx, r.Record, r.Err)
		if err == nil {
			r.Action = DeadLetter
			p.cfg.results(r)
			return true
		}
		failed := r
		failed.Err, failed.Action, failed.Delay = fmt.Errorf("kafkaidempotency: the dead-letter function failed: %w", err), Retry, p.cfg.retryDelay
		if part.stopped() {
			failed.Action, failed.Delay = Abandon, 0
			p.cfg.results(failed)
			return false
		}
		p.cfg.results(failed)
		if !part.sleep(p.cfg.retryDelay) {
			p.cfg.results(Result{Record: r.Record, Key: r.Key, Attempt: r.Attempt, Action: Abandon})
			return false
		}
	}
}

// attempt runs the handler once per key for the record and returns the
// Result with its Settlement.
func (p *Processor) attempt(ctx context.Context, rec *kgo.Record) Result {
	r := Result{Record: rec}
	key, err := p.cfg.key(rec)
	if err != nil {
		r.Err = fmt.Errorf("%w: kafkaidempotency: the record has no key: %w", idempotency.ErrKeyMissing, err)
		r.Settlement = p.server.Settle(false, false, r.Err)
		return r
	}
	r.Key = key
	// The value is the request the key stands for: a key reused for another
	// value is refused with ErrKeyReused instead of being skipped.
	_, replayed, err := idempotency.Do(ctx, p.server, p.op, key, wrapperspb.Bytes(rec.Value),
		func(ctx context.Context) (*emptypb.Empty, error) {
			r.Ran = true
			return &emptypb.Empty{}, p.run(ctx, rec)
		})
	r.Err = err
	r.Settlement = p.server.Settle(r.Ran, replayed, err)
	return r
}

// run calls the handler, turning a panic into [ErrHandlerPanicked].
func (p *Processor) run(ctx context.Context, rec *kgo.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanicked, v)
		}
	}()
	return p.handler(ctx, rec)
}
