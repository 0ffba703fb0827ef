package testkit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

// The rig of the message-consumer modules' tests (jetstreamidempotency,
// kafkaidempotency, watermillidempotency): what they share whatever the
// broker. Each module keeps its broker (an embedded NATS server, kfake,
// RabbitMQ) and its settlement's shape in its own helpers.

// ConsumerLease is the lease of [NewConsumerServer]'s Servers: short, so
// that a test whose first run dies sees its claim end soon.
const ConsumerLease = 300 * time.Millisecond

// ConsumerWait bounds every wait of a consumer test ([Results.Wait],
// [Ledger.WaitWrites], a broker's own waits): longer than the rig's
// wait.Timeout, since a broker redelivers only after an ack wait or a
// session timeout of a second or more. A test that reaches it fails.
const ConsumerWait = 30 * time.Second

// NewConsumerServer returns a Server over a memory store of its own with
// [idempotency.WithLease]([ConsumerLease]) and then opts; the Server and
// the store are closed when the test ends.
func NewConsumerServer(tb testing.TB, opts ...idempotency.ServerOption) *idempotency.Server {
	tb.Helper()
	srv := idempotency.NewServer(NewMemoryStore(tb), append([]idempotency.ServerOption{idempotency.WithLease(ConsumerLease)}, opts...)...)
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}

// Results collects what a consumer reports of each message it settles
// (give [Results.Add] to its WithResults option), for a test to read in
// order. It holds up to 1000 unread results; Add blocks beyond.
type Results[R any] chan R

// NewResults returns an empty Results.
func NewResults[R any]() Results[R] { return make(Results[R], 1000) }

// Add records res.
func (r Results[R]) Add(res R) { r <- res }

// Wait returns the next result that match accepts, and the results it
// passed over on the way in seen; it fails the test, naming what was
// awaited, if none comes within [ConsumerWait].
func (r Results[R]) Wait(tb testing.TB, what string, match func(R) bool) (got R, seen []R) {
	tb.Helper()
	limit := time.NewTimer(ConsumerWait)
	defer limit.Stop()
	for {
		select {
		case res := <-r:
			if match(res) {
				return res, seen
			}
			seen = append(seen, res)
		case <-limit.C:
			tb.Fatalf("no result %s after %v; saw %+v", what, ConsumerWait, seen)
		}
	}
}

// Drain returns the results recorded and not yet read, without waiting.
func (r Results[R]) Drain() []R {
	var out []R
	for {
		select {
		case res := <-r:
			out = append(out, res)
		default:
			return out
		}
	}
}

// Ledger is the side effect a consumer test owns: how many times each
// message's work was done, and in which order. It is safe for concurrent
// use; the zero value is ready to use.
type Ledger struct {
	mu     sync.Mutex
	done   map[string]int
	order  []string
	signal wait.Signal // notified by each Write
}

// Write records that the work of message id was done once more.
func (l *Ledger) Write(id string) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(map[string]int)
	}
	l.done[id]++
	l.order = append(l.order, id)
	l.mu.Unlock()
	l.signal.Notify()
}

// Count returns how many times the work of message id was done.
func (l *Ledger) Count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[id]
}

// Writes returns the ids written, in order.
func (l *Ledger) Writes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.order...)
}

// WaitWrites waits until the ledger holds n writes in all, and fails the
// test if it does not within [ConsumerWait].
func (l *Ledger) WaitWrites(tb testing.TB, n int) {
	tb.Helper()
	l.signal.UntilWithin(tb, fmt.Sprintf("%d writes in the ledger", n), ConsumerWait, func() bool {
		return len(l.Writes()) >= n
	})
}

// Background is a function [RunInBackground] runs in a goroutine of its
// own: a consumer's loop, a router.
type Background struct {
	tb     testing.TB
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	stop   sync.Once
}

// RunInBackground runs run in a goroutine of its own until
// [Background.Stop] is called or the test ends, whichever comes first.
// run's context is not the test's, which ends before cleanups run: it is
// cancelled by Stop.
func RunInBackground(tb testing.TB, run func(context.Context) error) *Background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	b := &Background{tb: tb, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.err = run(ctx)
	}()
	tb.Cleanup(b.Stop)
	return b
}

// Stop cancels run's context, waits for run to return, and fails the test
// (without stopping it) if run returned an error. Calls after the first
// do nothing.
func (b *Background) Stop() {
	b.stop.Do(func() {
		b.cancel()
		<-b.done
		if b.err != nil {
			b.tb.Error(b.err)
		}
	})
}

// Done returns a channel closed once run has returned, stopped or not.
func (b *Background) Done() <-chan struct{} { return b.done }

// Err returns what run returned, once Done is closed.
func (b *Background) Err() error {
	<-b.done
	return b.err
}
