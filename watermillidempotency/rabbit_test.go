package watermillidempotency_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// TestKilledConsumerLeaseTakeover: consumer A is killed mid-handler. Its
// subscriber is closed, so RabbitMQ gets its unacknowledged message back
// (as it does a dead connection's) and delivers it to consumer B; and its
// link to the store is cut (faultstore), so nothing renews its claim, and
// its handler never finishes. B gets ErrKeyInUse (the middleware waits the
// retry delay and the router nacks) until A's lease ends, then runs the
// message: the ledger, written at the handler's end, holds one entry.
func TestKilledConsumerLeaseTakeover(t *testing.T) {
	t.Parallel()
	const leaseA = 1500 * time.Millisecond
	u := rabbitURL(t)
	topic := uniqueName("orders")
	mem, book := testkit.NewMemoryStore(t), &testkit.Ledger{}
	dying := faultstore.New(mem)
	srvA := idempotency.NewServer(dying, idempotency.WithLease(leaseA), idempotency.WithStoreTimeout(100*time.Millisecond))
	srvB := idempotency.NewServer(mem, idempotency.WithLease(leaseA))

	started, killed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := startConsumer(t, u, topic, func(*message.Message) ([]*message.Message, error) {
		once.Do(func() { close(started) })
		<-killed // the process is dead: this run never reaches its side effect
		return nil, errors.New("killed")
	}, watermillidempotency.Middleware(srvA))
	t.Cleanup(func() { close(killed) }) // runs before A is stopped
	publish(t, publisher(t, u), topic, "m1", "order-1")
	<-started
	dying.Down.Store(true) // A's store link is cut: its lease runs out
	a.kill()               // and its subscriber: RabbitMQ requeues the message

	res := newResults()
	startConsumer(t, u, topic, func(msg *message.Message) ([]*message.Message, error) {
		book.Write(string(msg.Payload))
		return nil, nil
	}, watermillidempotency.Middleware(srvB, watermillidempotency.WithResults(res.Add), watermillidempotency.WithRetryDelay(100*time.Millisecond)))

	ran, before := res.Wait(t, "of B's run", func(r watermillidempotency.Result) bool { return r.Ran })
	if ran.Err != nil || ran.Action != watermillidempotency.Ack {
		t.Fatalf("B's run: %+v; want acked", ran)
	}
	if len(before) == 0 {
		t.Fatal("B ran the message at its first delivery; want ErrKeyInUse while A's lease lived")
	}
	for _, r := range before {
		if !errors.Is(r.Err, idempotency.ErrKeyInUse) || r.Ran || r.Action != watermillidempotency.NackAfterDelay {
			t.Fatalf("B before A's lease ended: %+v; want ErrKeyInUse, nacked after the delay", r)
		}
	}
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("ledger: order-1 written %d times, want 1", n)
	}
}

// TestAckLostReplaysProduced: consumer A runs the message, its handler
// returns a message for the output topic, A's router publishes it, and A
// dies before its ack reaches RabbitMQ (its subscriber closes once the
// publish returns), so RabbitMQ gets the input back and delivers it to
// consumer B. B finds the outcome stored: it does not run the handler and
// returns the stored message, with the same UUID, metadata and payload,
// which its router publishes again. The output topic holds two copies of
// one message, and a downstream consumer keyed on the UUID runs it once.
func TestAckLostReplaysProduced(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	topic := uniqueName("orders")
	srv, book, res := testkit.NewConsumerServer(t), &testkit.Ledger{}, newResults()
	// The downstream consumer, keyed on the UUID, first: its queue must
	// exist before anything is published to it.
	down, downRes := &testkit.Ledger{}, newResults()
	startConsumer(t, u, topic+".out", func(msg *message.Message) ([]*message.Message, error) {
		down.Write(msg.UUID)
		return nil, nil
	}, watermillidempotency.Middleware(testkit.NewConsumerServer(t), watermillidempotency.WithResults(downRes.Add)))
	ship := func(msg *message.Message) ([]*message.Message, error) {
		book.Write(string(msg.Payload))
		out := message.NewMessage("shipped-"+msg.UUID, []byte("shipped "+string(msg.Payload)))
		out.Metadata.Set("carrier", "post")
		return message.Messages{out}, nil
	}
	var a atomic.Pointer[consumer]
	dieAfterPublish := func(pub message.Publisher) (message.Publisher, error) {
		return publishThen{pub, func() { a.Load().kill() }}, nil
	}
	a.Store(startConsumer(t, u, topic, ship, watermillidempotency.Middleware(srv, watermillidempotency.WithResults(res.Add)), dieAfterPublish))
	publish(t, publisher(t, u), topic, "m1", "order-1")
	first, _ := res.Wait(t, "of A's run", func(r watermillidempotency.Result) bool { return r.Ran })
	if first.Action != watermillidempotency.Ack || len(first.Produced) != 1 {
		t.Fatalf("A: %+v; want acked with one message", first)
	}

	startConsumer(t, u, topic, ship, watermillidempotency.Middleware(srv, watermillidempotency.WithResults(res.Add), watermillidempotency.WithRetryDelay(100*time.Millisecond)))
	replay, _ := res.Wait(t, "of B's replay", func(r watermillidempotency.Result) bool { return r.Action == watermillidempotency.Ack })
	if replay.Ran || len(replay.Produced) != 1 {
		t.Fatalf("B: %+v; want not run, one message replayed", replay)
	}
	got, want := replay.Produced[0], first.Produced[0]
	if got.UUID != want.UUID || string(got.Payload) != string(want.Payload) || got.Metadata.Get("carrier") != "post" {
		t.Fatalf("replayed message %s %q %v; want %s %q %v", got.UUID, got.Payload, got.Metadata, want.UUID, want.Payload, want.Metadata)
	}
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("ledger: order-1 written %d times, want 1", n)
	}

	// Downstream: both copies arrive, and the one keyed on the UUID runs
	// once.
	downRes.Wait(t, "of the first copy", func(watermillidempotency.Result) bool { return true })
	second, _ := downRes.Wait(t, "of the second copy", func(watermillidempotency.Result) bool { return true })
	if second.Ran || second.Action != watermillidempotency.Ack || second.Key != want.UUID {
		t.Fatalf("the second copy: %+v; want keyed on its UUID, acked without running", second)
	}
	if n := down.Count(want.UUID); n != 1 {
		t.Fatalf("downstream ran %s %d times, want 1", want.UUID, n)
	}
}

// TestRetryableErrorRedelivers: a handler error the server does not store
// releases the claim and is returned, so the router nacks, RabbitMQ
// redelivers the message, and the handler runs again; its success is
// acked and never run again.
func TestRetryableErrorRedelivers(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	topic := uniqueName("orders")
	srv, book, res := testkit.NewConsumerServer(t), &testkit.Ledger{}, newResults()
	errFlaky := status.Error(codes.Unavailable, "the warehouse API timed out")
	runs := 0
	startConsumer(t, u, topic, func(msg *message.Message) ([]*message.Message, error) {
		if runs++; runs == 1 { // one message at a time: -race checks it
			return nil, errFlaky
		}
		book.Write(string(msg.Payload))
		return nil, nil
	}, watermillidempotency.Middleware(srv, watermillidempotency.WithResults(res.Add)))
	pub := publisher(t, u)
	publish(t, pub, topic, "m1", "order-1")
	failed, _ := res.Wait(t, "of the failed run", func(watermillidempotency.Result) bool { return true })
	if !failed.Ran || !errors.Is(failed.Err, errFlaky) || failed.Settlement != idempotency.SettleRetry || failed.Action != watermillidempotency.Nack {
		t.Fatalf("first delivery: %+v; want run, its error, nacked", failed)
	}
	again, _ := res.Wait(t, "of the redelivery", func(watermillidempotency.Result) bool { return true })
	if !again.Ran || again.Err != nil || again.Action != watermillidempotency.Ack {
		t.Fatalf("redelivery: %+v; want run and acked", again)
	}
	// A sentinel behind it: had the message come back once more, it would
	// be delivered before the sentinel.
	publish(t, pub, topic, "m2", "order-2")
	if next, _ := res.Wait(t, "of the sentinel", func(watermillidempotency.Result) bool { return true }); payload(next) != "order-2" {
		t.Fatalf("after the ack: %+v; want the sentinel", next)
	}
	if n := book.Count("order-1"); n != 1 || runs != 3 {
		t.Fatalf("order-1 written %d times, handler ran %d times; want 1, 3 (with the sentinel's)", n, runs)
	}
}

// TestStoredErrorFinal: a handler error the server stores is final on the
// delivery that ran it: the message goes to the dead-letter function and
// is acked, not nacked, so RabbitMQ never redelivers it (a sentinel
// published behind it comes next). The same message delivered again (a
// redelivery, published anew with its UUID) gets the stored error without
// running, and is dead-lettered and acked too.
func TestStoredErrorFinal(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	topic := uniqueName("orders")
	srv, res := testkit.NewConsumerServer(t), newResults()
	errNoProduct := status.Error(codes.InvalidArgument, "no such product")
	var mu sync.Mutex
	runs, dead := 0, []error{}
	startConsumer(t, u, topic, func(msg *message.Message) ([]*message.Message, error) {
		if string(msg.Payload) != "order-1" {
			return nil, nil
		}
		runs++
		return nil, errNoProduct
	}, watermillidempotency.Middleware(srv, watermillidempotency.WithResults(res.Add), watermillidempotency.WithDeadLetter(func(_ *message.Message, err error) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, err)
		return nil
	})))
	pub := publisher(t, u)
	for i, wantRan := range []bool{true, false} {
		publish(t, pub, topic, "m1", "order-1")
		publish(t, pub, topic, "sentinel-"+string(rune('a'+i)), "sentinel")
		got, _ := res.Wait(t, "of order-1", func(watermillidempotency.Result) bool { return true })
		if payload(got) != "order-1" || got.Ran != wantRan || status.Code(got.Err) != codes.InvalidArgument ||
			got.Settlement != idempotency.SettleReject || got.Action != watermillidempotency.DeadLetter {
			t.Fatalf("delivery %d of order-1: %+v; want ran %v, its stored error, dead-lettered", i+1, got, wantRan)
		}
		if next, _ := res.Wait(t, "of the sentinel", func(watermillidempotency.Result) bool { return true }); payload(next) != "sentinel" {
			t.Fatalf("after order-1's delivery %d: %+v; want the sentinel, not a redelivery", i+1, next)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 || len(dead) != 2 || status.Code(dead[0]) != codes.InvalidArgument || status.Code(dead[1]) != codes.InvalidArgument {
		t.Fatalf("the handler ran %d times, dead letters %v; want 1 run, 2 dead letters of the stored error", runs, dead)
	}
}

// publishThen is a publisher that calls then after each publish that
// succeeded.
type publishThen struct {
	message.Publisher
	then func()
}

func (p publishThen) Publish(topic string, msgs ...*message.Message) error {
	if err := p.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	p.then()
	return nil
}

// TestCompetingConsumers: two consumers share a queue, and every third
// message's first run fails with a retryable error, so RabbitMQ
// redelivers it, to either consumer: every message's side effect happens
// once, and every message is acked.
func TestCompetingConsumers(t *testing.T) {
	t.Parallel()
	const n = 60
	u := rabbitURL(t)
	topic := uniqueName("orders")
	mem, book, res := testkit.NewMemoryStore(t), &testkit.Ledger{}, newResults()
	var mu sync.Mutex
	failed := map[string]bool{}
	ship := func(msg *message.Message) ([]*message.Message, error) {
		id := string(msg.Payload)
		var i int
		if _, err := fmt.Sscanf(id, "order-%d", &i); err != nil {
			return nil, err
		}
		mu.Lock()
		fail := !failed[id] && i%3 == 0
		failed[id] = true
		mu.Unlock()
		if fail {
			return nil, status.Error(codes.Unavailable, "the warehouse API timed out")
		}
		book.Write(id)
		return nil, nil
	}
	for range 2 { // two processes: a server each, one store
		startConsumer(t, u, topic, ship, watermillidempotency.Middleware(idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease)),
			watermillidempotency.WithResults(res.Add), watermillidempotency.WithRetryDelay(20*time.Millisecond)))
	}
	pub := publisher(t, u)
	for i := range n {
		publish(t, pub, topic, fmt.Sprintf("m%d", i), fmt.Sprintf("order-%d", i))
	}
	acked, nacked := map[string]int{}, 0
	for len(acked) < n {
		r, _ := res.Wait(t, "of an ack", func(r watermillidempotency.Result) bool {
			if r.Action == watermillidempotency.Nack {
				nacked++
			}
			return r.Action == watermillidempotency.Ack
		})
		acked[payload(r)]++
	}
	if nacked < n/3 {
		t.Errorf("%d retryable failures nacked, want at least %d", nacked, n/3)
	}
	for i := range n {
		if id := fmt.Sprintf("order-%d", i); book.Count(id) != 1 {
			t.Errorf("%s written %d times, want 1", id, book.Count(id))
		}
	}
}
