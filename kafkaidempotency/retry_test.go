package kafkaidempotency_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// deadLetters records what the dead-letter function was given.
type deadLetters struct {
	mu   sync.Mutex
	recs []string
	errs []error
}

func (d *deadLetters) option() kafkaidempotency.Option {
	return kafkaidempotency.WithDeadLetter(func(_ context.Context, rec *kgo.Record, err error) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.recs = append(d.recs, string(rec.Value))
		d.errs = append(d.errs, err)
		return nil
	})
}

func (d *deadLetters) got() ([]string, []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.recs), slices.Clone(d.errs)
}

// TestRetryInPlace: a record whose handler fails with a retryable error
// (a code the server does not store, or a panic) releases its claim and is
// run again in place, after a backoff, before the partition's next record:
// Kafka commits are positional, so moving past it would commit it. After
// WithMaxAttempts failed runs it is dead-lettered (ErrAttemptsExhausted
// with the last error) and committed, and the partition goes on.
func TestRetryInPlace(t *testing.T) {
	t.Parallel()
	errFlaky := status.Error(codes.Unavailable, "the warehouse API timed out")
	tests := []struct {
		name     string
		failures int  // runs of order-1 that fail
		panics   bool // they panic instead of returning errFlaky
		attempts int  // WithMaxAttempts
		wantRuns int
		wantDead bool
	}{
		{"fails twice, then succeeds", 2, false, 5, 3, false},
		{"panics twice, then succeeds", 2, true, 5, 3, false},
		{"fails on every attempt", 100, false, 3, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := startCluster(t, 1)
			book, res, dead := &testkit.Ledger{}, newResults(), &deadLetters{}
			var mu sync.Mutex
			runs := 0
			p := kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(_ context.Context, rec *kgo.Record) error {
				if string(rec.Value) == "order-1" {
					mu.Lock()
					runs++
					n := runs
					mu.Unlock()
					if n <= tt.failures {
						if tt.panics {
							panic("a poisoned record")
						}
						return errFlaky
					}
				}
				book.Write(string(rec.Value))
				return nil
			}, kafkaidempotency.WithResults(res.Add), dead.option(), kafkaidempotency.WithMaxAttempts(tt.attempts),
				kafkaidempotency.WithBackoff(10*time.Millisecond, 40*time.Millisecond))
			k.produce(0, "order-1")
			k.produce(0, "order-2")
			k.run(p, group)
			k.waitCommitted(group, 0, 2)

			var attempts []kafkaidempotency.Result
			for _, r := range res.Drain() {
				if value(r) == "order-1" {
					attempts = append(attempts, r)
				}
			}
			if len(attempts) != tt.wantRuns {
				t.Fatalf("order-1: %d attempts %+v, want %d", len(attempts), attempts, tt.wantRuns)
			}
			for i, r := range attempts {
				last := i == len(attempts)-1
				want := kafkaidempotency.Retry
				switch {
				case last && tt.wantDead:
					want = kafkaidempotency.DeadLetter
				case last:
					want = kafkaidempotency.Commit
				}
				if r.Attempt != i+1 || !r.Ran || r.Action != want {
					t.Errorf("order-1 attempt %d: %+v; want run, %v", i+1, r, want)
				}
				if want == kafkaidempotency.Retry && (r.Settlement != idempotency.SettleRetry || r.Delay <= 0 ||
					tt.panics != errors.Is(r.Err, kafkaidempotency.ErrHandlerPanicked)) {
					t.Errorf("order-1 attempt %d: %+v; want a retryable error, retried after a delay", i+1, r)
				}
			}
			recs, errs := dead.got()
			switch {
			case tt.wantDead && (len(recs) != 1 || recs[0] != "order-1" || !errors.Is(errs[0], kafkaidempotency.ErrAttemptsExhausted) || !errors.Is(errs[0], errFlaky)):
				t.Errorf("dead letters %v %v; want order-1 with ErrAttemptsExhausted and its last error", recs, errs)
			case !tt.wantDead && len(recs) != 0:
				t.Errorf("dead letters %v %v; want none", recs, errs)
			}
			wantBook := []string{"order-1", "order-2"}
			if tt.wantDead {
				wantBook = []string{"order-2"}
			}
			if got := book.Writes(); !slices.Equal(got, wantBook) {
				t.Errorf("ledger %v, want %v: order-2 after order-1 settled", got, wantBook)
			}
		})
	}
}

// TestStoredErrorFinal: a handler error the server stores is final on the
// attempt that ran it, whatever WithMaxAttempts says: the record is
// dead-lettered once and committed. A later delivery of the record (here
// a second consumer group on the same operation and store, reading the
// topic from its start) gets the stored error back without running and
// dead-letters it too. A retryable error was never dead-lettered.
func TestStoredErrorFinal(t *testing.T) {
	t.Parallel()
	errNoProduct := status.Error(codes.InvalidArgument, "no such product")
	k := startCluster(t, 1)
	srv := testkit.NewConsumerServer(t)
	runs := 0
	handler := func(context.Context, *kgo.Record) error {
		runs++ // one record, one partition, one member at a time: -race checks it
		return errNoProduct
	}
	for _, g := range []string{"first", "second"} {
		res, dead := newResults(), &deadLetters{}
		p := kafkaidempotency.NewProcessor(srv, "orders.ship", handler, kafkaidempotency.WithResults(res.Add), dead.option(), kafkaidempotency.WithMaxAttempts(5))
		if g == "first" {
			k.produce(0, "order-1")
		}
		stop := k.run(p, g)
		k.waitCommitted(g, 0, 1)
		stop()
		got := res.Drain()
		wantRan := g == "first"
		if len(got) != 1 || got[0].Ran != wantRan || got[0].Settlement != idempotency.SettleReject ||
			got[0].Action != kafkaidempotency.DeadLetter || status.Code(got[0].Err) != codes.InvalidArgument {
			t.Fatalf("group %s: %+v; want one attempt, ran %v, rejected and dead-lettered with the stored error", g, got, wantRan)
		}
		if recs, errs := dead.got(); len(recs) != 1 || status.Code(errs[0]) != codes.InvalidArgument {
			t.Fatalf("group %s: dead letters %v %v; want order-1 with its stored error", g, recs, errs)
		}
	}
	if runs != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs)
	}
}

// TestDeadLetterFailureRetried: a dead-letter function that fails is
// called again after the retry delay, and the record is committed only
// once it succeeds; the handler is not run again.
func TestDeadLetterFailureRetried(t *testing.T) {
	t.Parallel()
	k := startCluster(t, 1)
	res := newResults()
	runs, calls := 0, 0
	errTopicDown := errors.New("the dead-letter topic is unavailable")
	p := kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(context.Context, *kgo.Record) error {
		runs++
		return status.Error(codes.InvalidArgument, "no such product")
	}, kafkaidempotency.WithResults(res.Add), kafkaidempotency.WithRetryDelay(10*time.Millisecond),
		kafkaidempotency.WithDeadLetter(func(context.Context, *kgo.Record, error) error {
			if calls++; calls == 1 {
				return errTopicDown
			}
			return nil
		}))
	k.produce(0, "order-1")
	k.run(p, group)
	k.waitCommitted(group, 0, 1)
	got := res.Drain()
	if len(got) != 2 || got[0].Action != kafkaidempotency.Retry || !errors.Is(got[0].Err, errTopicDown) ||
		got[1].Action != kafkaidempotency.DeadLetter || runs != 1 || calls != 2 {
		t.Fatalf("results %+v, handler ran %d times, dead-letter called %d times; want a retried dead letter, one run, two calls", got, runs, calls)
	}
}

// TestRetryLaterWaitsRetryAfter: a record whose store is full (or whose
// key is in flight) is tried again in place after the server's RetryAfter
// by default, for as long as it takes, and never dead-lettered.
func TestRetryLaterWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	const retryAfter = 50 * time.Millisecond
	k := startCluster(t, 1)
	full := faultstore.New(testkit.NewMemoryStore(t))
	full.Full.Store(true)
	srv := idempotency.NewServer(full, idempotency.WithRetryAfter(retryAfter))
	res, dead := newResults(), &deadLetters{}
	p := kafkaidempotency.NewProcessor(srv, "orders.ship", func(context.Context, *kgo.Record) error { return nil },
		kafkaidempotency.WithResults(res.Add), dead.option(), kafkaidempotency.WithMaxAttempts(1))
	k.produce(0, "order-1")
	k.run(p, group)
	for i := range 3 { // more than WithMaxAttempts: a store that is full is not a failed run
		r, _ := res.Wait(t, "of an attempt", func(kafkaidempotency.Result) bool { return true })
		if r.Ran || !errors.Is(r.Err, idempotency.ErrStoreFull) || r.Action != kafkaidempotency.Retry || r.Delay != retryAfter {
			t.Fatalf("attempt %d: %+v; want ErrStoreFull, retried after the server's RetryAfter", i+1, r)
		}
	}
	full.Full.Store(false)
	k.waitCommitted(group, 0, 1)
	if recs, _ := dead.got(); len(recs) != 0 {
		t.Fatalf("dead letters %v, want none", recs)
	}
}
