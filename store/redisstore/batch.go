package redisstore

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// request is one store step on its way to Redis: one command (SET, GET or
// the EVALSHA of a script) on one key, and whether a WAIT must follow it on
// the same connection.
type request struct {
	ctx    context.Context
	key    string
	cmd    *redis.Cmd
	script *script // the script cmd runs, for the EVAL fallback; nil for a native command
	wait   bool

	// acks and waitErr are the reply of the WAIT that followed cmd.
	acks    int64
	waitErr error

	state atomic.Int32  // queued, sent or abandoned; only for queued requests
	done  chan struct{} // closed once the results are in, for queued requests
}

// Request states, for a request queued behind a batch on the wire.
const (
	queued int32 = iota
	sent
	abandoned
)

// batcher shares round trips between concurrent store calls bound for one
// Redis node. A call that finds fewer than lanes batches on the wire is
// sent at once, in its caller's goroutine, so a lone caller waits for
// nothing but its own round trip. Calls that arrive while lanes batches are
// on the wire queue, and go out together, as one pipeline, as soon as a
// batch returns. There is no timer: nothing ever waits for more calls to
// come. Each call still costs its caller one round trip.
//
// A batch whose connection breaks can hold its lane for a long time
// (go-redis redials and resends it, with backoff). When no batch has come
// back for stallAfter, arriving calls open more lanes, up to maxLanes, so
// that one broken connection does not hold up every call to the node.
type batcher struct {
	send func(ctx context.Context, reqs []*request)
	// stallAfter is the stallAfter constant, except in tests of this
	// package that open lanes at will. Guarded by mu.
	stallAfter time.Duration

	mu       sync.Mutex
	inFlight int
	progress time.Time // when a batch last came back, or a lane opened on an idle batcher
	queue    []*request

	hooks batcherHooks
}

// batcherHooks are called, when set, at steps of a queued request, so
// that this package's tests can order other events around them without
// sleeping. They are nil outside those tests.
type batcherHooks struct {
	queued func(key string) // a request has joined the queue
}

// Lanes: batches a batcher keeps on the wire at once, normally and while
// the batches on the wire have not come back for stallAfter.
const (
	lanes      = 2
	maxLanes   = 8
	stallAfter = 5 * time.Millisecond
)

// do sends r, alone or with the calls queued with it, and returns once its
// results are in r. It returns an error, and leaves r alone, only when the
// caller's context ended first: sent then says whether r had gone out
// (its command may still run) or was dropped from the queue unsent.
func (b *batcher) do(r *request) (wasSent bool, err error) {
	if b.start() {
		return b.lead(r)
	}
	r.own()
	b.mu.Lock()
	if b.take() {
		b.mu.Unlock()
		return b.lead(r)
	}
	r.done = make(chan struct{})
	b.queue = append(b.queue, r)
	b.mu.Unlock()
	if b.hooks.queued != nil {
		b.hooks.queued(r.key)
	}
	return b.await(r)
}

// start takes a lane if one is free.
func (b *batcher) start() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.take()
}

// take takes a lane if one is free. Callers hold mu.
func (b *batcher) take() bool {
	if !b.free() {
		return false
	}
	if b.inFlight == 0 {
		b.progress = time.Now()
	}
	b.inFlight++
	return true
}

// free reports whether a call may open a lane. Callers hold mu.
func (b *batcher) free() bool {
	return b.inFlight < lanes || (b.inFlight < maxLanes && time.Since(b.progress) > b.stallAfter)
}

// lead sends r at once, in its caller's goroutine, on the slot it took.
func (b *batcher) lead(r *request) (bool, error) {
	b.send(r.ctx, []*request{r})
	b.mu.Lock()
	b.progress = time.Now()
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return true, nil
	}
	b.mu.Unlock()
	// The calls that queued meanwhile go out from a goroutine of their own,
	// which takes over this slot, so this caller returns at once.
	go b.drain()
	return true, nil
}

// own copies the byte slices among r's arguments (the data of a
// completion): a queued request may be sent after its caller has left
// (its context ended), when the caller may already be using those bytes
// for something else. A request sent by its caller needs no copy: the
// caller waits for the round trip.
func (r *request) own() {
	args := r.cmd.Args()
	for i, a := range args {
		if b, ok := a.([]byte); ok {
			args[i] = bytes.Clone(b)
		}
	}
}

// await waits for a queued request's results or its context's end. When
// the context ends first, a request still queued is dropped, unsent; one
// already sent may still run, and its results come in r later, when r.done
// is closed (see afterRoundTrip).
func (b *batcher) await(r *request) (bool, error) {
	select {
	case <-r.done:
		return true, nil
	case <-r.ctx.Done():
	}
	select {
	case <-r.done:
		return true, nil
	default:
	}
	if r.state.CompareAndSwap(queued, abandoned) {
		return false, r.ctx.Err()
	}
	return true, r.ctx.Err()
}

// afterRoundTrip runs f once r's round trip is over, r having been sent
// (by [Store.do], with or without an error): at once for a request sent
// by its caller, whose call returned after its round trip, and for a
// queued request whose results are in; for a queued request whose caller
// left once it had gone out in a batch, from a goroutine of its own when
// the batch is back (go-redis may still be sending it, or resending it
// after a broken connection).
func (r *request) afterRoundTrip(f func()) {
	if r.done != nil {
		select {
		case <-r.done:
		default:
			go func() {
				<-r.done
				f()
			}()
			return
		}
	}
	f()
}

// drain sends the queued calls, one batch at a time, until the queue is
// empty, and then gives up its slot.
func (b *batcher) drain() {
	var spare []*request
	for {
		b.mu.Lock()
		batch := b.queue
		if len(batch) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		b.queue = spare
		b.mu.Unlock()
		b.run(batch)
		clear(batch)
		spare = batch[:0]
		b.mu.Lock()
		b.progress = time.Now()
		b.mu.Unlock()
	}
}

// run sends the requests of batch whose callers are still waiting, as one
// pipeline, and hands each its results.
func (b *batcher) run(batch []*request) {
	live := make([]*request, 0, len(batch))
	for _, r := range batch {
		if r.state.CompareAndSwap(queued, sent) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	b.send(ctx, live)
	cancel()
	for _, r := range live {
		close(r.done)
	}
}

// batchContext returns the context a batch is sent with: the values of its
// first request's context (for hooks and tracing), no cancellation (one
// caller leaving must not fail the others, and each caller stops waiting
// on its own), and the latest of the requests' deadlines, or none when one
// of them has none.
func batchContext(reqs []*request) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, r := range reqs {
		d, ok := r.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(reqs[0].ctx), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(reqs[0].ctx), latest)
}
