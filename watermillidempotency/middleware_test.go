package watermillidempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// handle calls the handler h wrapped in the middleware mw once, as a
// router's handler would, for a message of payload with the UUID and
// metadata (pairs of key and value).
func handle(mw message.HandlerMiddleware, h message.HandlerFunc, uuid, payload string, metadata ...string) ([]*message.Message, error) {
	m := message.NewMessage(uuid, []byte(payload))
	for i := 0; i+1 < len(metadata); i += 2 {
		m.Metadata.Set(metadata[i], metadata[i+1])
	}
	return mw(h)(m)
}

// TestOperationIsHandlerName: by default each message's key is claimed
// under the name of the router's handler, so two handlers of one message
// (a fan-out on watermill's in-process pub/sub) each run it once, and a
// redelivery of it runs neither.
func TestOperationIsHandlerName(t *testing.T) {
	t.Parallel()
	pubsub := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	t.Cleanup(func() { _ = pubsub.Close() })
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	res, book := newResults(), &testkit.Ledger{}
	router.AddMiddleware(watermillidempotency.Middleware(testkit.NewConsumerServer(t), watermillidempotency.WithResults(res.Add)))
	for _, name := range []string{"ship", "invoice"} {
		router.AddConsumerHandler(name, "orders", pubsub, func(msg *message.Message) error {
			book.Write(name + " " + string(msg.Payload))
			return nil
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-router.Running()
	for range 2 { // the message and a redelivery of it
		if err := pubsub.Publish("orders", message.NewMessage("m1", []byte("order-1"))); err != nil {
			t.Fatal(err)
		}
	}
	ran := map[string]int{}
	for range 4 {
		r, _ := res.Wait(t, "of a delivery", func(watermillidempotency.Result) bool { return true })
		if r.Action != watermillidempotency.Ack || r.Key != "m1" {
			t.Fatalf("%+v; want acked, keyed on the UUID", r)
		}
		if r.Ran {
			ran[r.Operation]++
		}
	}
	if ran["ship"] != 1 || ran["invoice"] != 1 || book.Count("ship order-1") != 1 || book.Count("invoice order-1") != 1 {
		t.Fatalf("runs by operation %v; want each handler's once", ran)
	}
}

// TestNoOperation: a message delivered outside a router (no handler name
// in its context) to a middleware without WithOperation is refused with
// ErrNoOperation and returned, so it is nacked rather than lost, and the
// handler does not run; WithOperation names the operation then.
func TestNoOperation(t *testing.T) {
	t.Parallel()
	srv := testkit.NewConsumerServer(t)
	runs := 0
	h := func(*message.Message) ([]*message.Message, error) { runs++; return nil, nil }
	if _, err := handle(watermillidempotency.Middleware(srv), h, "m1", "order-1"); !errors.Is(err, watermillidempotency.ErrNoOperation) || runs != 0 {
		t.Fatalf("without an operation: %v, ran %d times; want ErrNoOperation, not run", err, runs)
	}
	if _, err := handle(watermillidempotency.Middleware(srv, watermillidempotency.WithOperation("orders.ship")), h, "m1", "order-1"); err != nil || runs != 1 {
		t.Fatalf("WithOperation: %v, ran %d times; want run", err, runs)
	}
}

// TestProducedReplayed: the messages a handler returns are the stored
// outcome: a replay returns them again without running the handler, with
// the same UUIDs, metadata (whatever its bytes) and payloads, in order. A
// handler that returns none replays none.
func TestProducedReplayed(t *testing.T) {
	t.Parallel()
	mw := watermillidempotency.Middleware(testkit.NewConsumerServer(t), watermillidempotency.WithOperation("orders.ship"))
	runs := 0
	h := func(msg *message.Message) ([]*message.Message, error) {
		runs++
		if string(msg.Payload) == "nothing" {
			return nil, nil
		}
		a := message.NewMessage("out-1", []byte("shipped"))
		a.Metadata.Set("carrier", "post")
		a.Metadata.Set("raw", "\xff\xfe not UTF-8")
		return message.Messages{a, message.NewMessage("out-2", []byte{0, 1, 2})}, nil
	}
	first, err1 := handle(mw, h, "m1", "order-1")
	again, err2 := handle(mw, h, "m1", "order-1")
	if err1 != nil || err2 != nil || runs != 1 || len(again) != 2 {
		t.Fatalf("run %v %v, replay %v %v, ran %d times; want two messages replayed, one run", first, err1, again, err2, runs)
	}
	for i := range first {
		if !first[i].Equals(again[i]) {
			t.Errorf("message %d replayed as %s %q %v; want %s %q %v", i, again[i].UUID, again[i].Payload, again[i].Metadata,
				first[i].UUID, first[i].Payload, first[i].Metadata)
		}
	}
	if _, err := handle(mw, h, "m2", "nothing"); err != nil {
		t.Fatalf("first run of no messages: %v", err)
	}
	if none, err := handle(mw, h, "m2", "nothing"); err != nil || len(none) != 0 || runs != 2 {
		t.Fatalf("replay of no messages: %v, %v, ran %d times; want none, one run", none, err, runs)
	}
}

// TestFinalOutcomes: a stored error, a key reused for another payload and
// a message without a key are final: handed to the dead-letter function
// and acked (nothing returned), the handler not run again. A dead-letter
// function that fails makes the delivery return its error, so it is
// nacked, and the redelivery calls it again without running the handler.
// A retryable error is returned at once, a panic as ErrHandlerPanicked,
// and a key in flight after the retry delay.
func TestFinalOutcomes(t *testing.T) {
	t.Parallel()
	errNoProduct := status.Error(codes.InvalidArgument, "no such product")
	errFlaky := status.Error(codes.Unavailable, "the warehouse timed out")
	var mu sync.Mutex
	var dead []string
	failDeadLetter := true
	res := newResults()
	inFlight, release := make(chan struct{}), make(chan struct{})
	mw := watermillidempotency.Middleware(testkit.NewConsumerServer(t), watermillidempotency.WithResults(res.Add),
		watermillidempotency.WithOperation("orders.ship"),
		watermillidempotency.WithKey(watermillidempotency.MetadataKey("order_id")),
		watermillidempotency.WithRetryDelay(10*time.Millisecond),
		watermillidempotency.WithDeadLetter(func(msg *message.Message, err error) error {
			mu.Lock()
			defer mu.Unlock()
			dead = append(dead, string(msg.Payload))
			if string(msg.Payload) == "order-9" && failDeadLetter {
				failDeadLetter = false
				return errors.New("the poison topic is unavailable")
			}
			return nil
		}))
	runs := map[string]int{}
	h := func(msg *message.Message) ([]*message.Message, error) {
		mu.Lock()
		runs[string(msg.Payload)]++
		mu.Unlock()
		switch string(msg.Payload) {
		case "order-1", "order-9":
			return nil, errNoProduct
		case "order-2":
			return nil, errFlaky
		case "order-3":
			panic("a poisoned message")
		case "order-4":
			close(inFlight)
			<-release
		}
		return nil, nil
	}
	tests := []struct {
		name, uuid, payload, orderID string
		ran                          bool
		action                       watermillidempotency.Action
		err                          error // "" for none
	}{
		{"stored error", "m1", "order-1", "1", true, watermillidempotency.DeadLetter, nil},
		{"stored error replayed", "m1-again", "order-1", "1", false, watermillidempotency.DeadLetter, nil},
		{"key reused", "m1-other", "order-1, another product", "1", false, watermillidempotency.DeadLetter, nil},
		{"no key", "m5", "order-5", "", false, watermillidempotency.DeadLetter, nil},
		{"dead letter fails", "m9", "order-9", "9", true, watermillidempotency.Nack, errors.New("poison")},
		{"dead letter again", "m9", "order-9", "9", false, watermillidempotency.DeadLetter, nil},
		{"retryable", "m2", "order-2", "2", true, watermillidempotency.Nack, errFlaky},
		{"panic", "m3", "order-3", "3", true, watermillidempotency.Nack, watermillidempotency.ErrHandlerPanicked},
	}
	for _, tt := range tests {
		md := []string{}
		if tt.orderID != "" {
			md = []string{"order_id", tt.orderID}
		}
		_, err := handle(mw, h, tt.uuid, tt.payload, md...)
		r, _ := res.Wait(t, "of "+tt.name, func(watermillidempotency.Result) bool { return true })
		if r.Ran != tt.ran || r.Action != tt.action || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: %+v, returned %v; want ran %v, %v", tt.name, r, err, tt.ran, tt.action)
		}
		if tt.err != nil && !errors.Is(err, tt.err) && !strings.Contains(err.Error(), tt.err.Error()) {
			t.Errorf("%s: returned %v, want %v", tt.name, err, tt.err)
		}
	}
	// A key in flight: the second delivery waits the retry delay and
	// returns ErrKeyInUse.
	done := make(chan error, 1)
	go func() { _, err := handle(mw, h, "m4", "order-4", "order_id", "4"); done <- err }()
	<-inFlight
	if _, err := handle(mw, h, "m4", "order-4", "order_id", "4"); !errors.Is(err, idempotency.ErrKeyInUse) {
		t.Errorf("in flight: %v, want ErrKeyInUse", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("the run in flight: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["order-1"] != 1 || runs["order-9"] != 1 || runs["order-5"] != 0 || runs["order-4"] != 1 {
		t.Errorf("runs %v; want order-1, order-9 and order-4 once, order-5 never", runs)
	}
	if want := []string{"order-1", "order-1", "order-1, another product", "order-5", "order-9", "order-9"}; strings.Join(dead, "|") != strings.Join(want, "|") {
		t.Errorf("dead letters %q, want %q", dead, want)
	}
}

// TestRetryLaterWaitsRetryAfter: a message whose store is full (or whose
// key is in flight) is returned with its error only after the server's
// RetryAfter by default, so the router's nack does not bring it straight
// back; the handler does not run.
func TestRetryLaterWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	const retryAfter = 1500 * time.Millisecond // above DefaultRetryAfter: a delay of the default would be too short
	full := faultstore.New(testkit.NewMemoryStore(t))
	full.Full.Store(true)
	mw := watermillidempotency.Middleware(idempotency.NewServer(full, idempotency.WithRetryAfter(retryAfter)),
		watermillidempotency.WithOperation("orders.ship"))
	runs := 0
	start := time.Now()
	_, err := handle(mw, func(*message.Message) ([]*message.Message, error) { runs++; return nil, nil }, "m1", "order-1")
	if took := time.Since(start); !errors.Is(err, idempotency.ErrStoreFull) || took < retryAfter || runs != 0 {
		t.Fatalf("%v after %v, ran %d times; want ErrStoreFull after at least %v, not run", err, took, runs, retryAfter)
	}
}
