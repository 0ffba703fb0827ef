package httpidempotency_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// The answer to the first attempt is lost after the handler ran (the
// proxy forwards the request and drops the reply): the transport retries
// with the same key and gets the stored answer; the handler ran once.
func TestTransportLostResponse(t *testing.T) {
	t.Parallel()
	var seen arrivals
	e := newEnv(t, setup{outer: seen.outer})
	proxy := e.proxy(t)
	var hook retries
	client := newClient(t, httpidempotency.WithOnRetry(hook.hook))

	proxy.CutNextReply(1)
	r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":1999}`))
	if r.Status != http.StatusCreated || r.Body != `{"order":{"amount":1999}}` || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("got %d %s, replayed %q; want the stored 201, replayed", r.Status, r.Body, r.Header.Get(httpidempotency.ReplayedHeader))
	}
	e.wantRuns(t, 1)
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d replies, want 1", proxy.Cuts())
	}
	got := seen.all()
	if len(got) != 2 || len(got[0].keys) != 1 || uuid.Validate(got[0].keys[0]) != nil {
		t.Fatalf("attempts %+v, want two, the first with a minted UUID", got)
	}
	seen.wantKeys(t, 2, got[0].keys[0])
	if calls := hook.all(); len(calls) != 1 || calls[0].attempt != 2 || calls[0].err == nil || calls[0].status != 0 {
		t.Fatalf("retry hook calls %+v, want one before attempt 2, with the connection's error", calls)
	}
}

// A request sent while the same key is in flight gets 409 with this
// library's in-use reason: the transport retries after the server's
// Retry-After and gets the first request's answer, replayed.
func TestTransportInFlight(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, setup{
		handler: func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			created(w, r)
		},
		server: []idempotency.ServerOption{idempotency.WithRetryAfter(0)},
	})
	first := make(chan response, 1)
	go func() { first <- e.post(t, "/orders", `{"amount":1999}`, "order-1042") }()
	<-started

	var won response
	hook := retries{then: func(int) {
		close(release) // the original finishes and its answer is stored
		won = <-first
	}}
	client := newClient(t, httpidempotency.WithOnRetry(hook.hook), httpidempotency.WithBackoff(nil))
	r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":1999}`, "order-1042"))
	if won.Status != http.StatusCreated || r.Status != http.StatusCreated || r.Body != won.Body || r.Header.Get(httpidempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry got %d %s, replayed %q; want the original's %d %s, replayed", r.Status, r.Body, r.Header.Get(httpidempotency.ReplayedHeader), won.Status, won.Body)
	}
	if calls := hook.all(); len(calls) != 1 || calls[0].status != http.StatusConflict || calls[0].err != nil {
		t.Fatalf("retry hook calls %+v, want one, caused by the 409", calls)
	}
	e.wantRuns(t, 1)
}

// A store that is down is answered 503 with the server's Retry-After: the
// transport waits that long, then retries, and the handler runs once the
// store is back. A Retry-After over WithMaxPushback ends the retries: the
// 503 comes back at once, with its problem.
func TestTransportStoreUnavailable(t *testing.T) {
	t.Parallel()
	t.Run("retried after Retry-After", func(t *testing.T) {
		t.Parallel()
		var seen arrivals
		e := newEnv(t, setup{outer: seen.outer, server: []idempotency.ServerOption{idempotency.WithRetryAfter(time.Second)}})
		e.store.Down.Store(true)
		hook := retries{then: func(int) { e.store.Down.Store(false) }}
		client := newClient(t, httpidempotency.WithOnRetry(hook.hook), httpidempotency.WithBackoff(nil))
		r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":1999}`))
		if r.Status != http.StatusCreated || r.Header.Get(httpidempotency.ReplayedHeader) != "" {
			t.Fatalf("got %d %s, want 201 from the handler", r.Status, r.Body)
		}
		got := seen.all()
		if len(got) != 2 {
			t.Fatalf("%d attempts, want 2", len(got))
		}
		if wait := got[1].at.Sub(got[0].at); wait < time.Second {
			t.Fatalf("retried after %v, before the server's Retry-After of 1s", wait)
		}
		if calls := hook.all(); len(calls) != 1 || calls[0].status != http.StatusServiceUnavailable {
			t.Fatalf("retry hook calls %+v, want one, caused by the 503", calls)
		}
		e.wantRuns(t, 1)
	})
	t.Run("Retry-After over the cap", func(t *testing.T) {
		t.Parallel()
		var seen arrivals
		e := newEnv(t, setup{outer: seen.outer, server: []idempotency.ServerOption{idempotency.WithRetryAfter(2 * time.Second)}})
		e.store.Down.Store(true)
		client := newClient(t, httpidempotency.WithMaxPushback(time.Second))
		r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":1999}`))
		wantProblem(t, r, http.StatusServiceUnavailable, idempotency.ErrStoreUnavailable.Reason)
		if len(seen.all()) != 1 {
			t.Fatalf("%d attempts, want 1", len(seen.all()))
		}
		e.wantRuns(t, 0)
	})
}

// A key reused with another request is answered 422, which the transport
// never retries.
func TestTransportReusedKey(t *testing.T) {
	t.Parallel()
	var seen arrivals
	e := newEnv(t, setup{outer: seen.outer})
	var hook retries
	client := newClient(t, httpidempotency.WithOnRetry(hook.hook))
	if r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":1999}`, "order-1042")); r.Status != http.StatusCreated {
		t.Fatalf("first request: %d %s", r.Status, r.Body)
	}
	r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":2500}`, "order-1042"))
	wantProblem(t, r, http.StatusUnprocessableEntity, idempotency.ErrKeyReused.Reason)
	seen.wantKeys(t, 2, "order-1042")
	if calls := hook.all(); len(calls) != 0 {
		t.Fatalf("retry hook calls %+v, want none", calls)
	}
	e.wantRuns(t, 1)
}

// A request whose body cannot be sent again (no GetBody) is sent once: a
// lost answer comes back as the connection's error wrapped with
// ErrNotRewindable, and a 503 as it came.
func TestTransportNotRewindable(t *testing.T) {
	t.Parallel()
	body := func() io.Reader { return io.MultiReader(strings.NewReader(`{"amount":1999}`)) } // no GetBody
	t.Run("lost answer", func(t *testing.T) {
		t.Parallel()
		var seen arrivals
		e := newEnv(t, setup{outer: seen.outer})
		proxy := e.proxy(t)
		client := newClient(t)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/orders", body())
		if err != nil {
			t.Fatal(err)
		}
		proxy.CutNextReply(1)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got %d, want the lost answer's error", resp.StatusCode)
		}
		if !errors.Is(err, httpidempotency.ErrNotRewindable) {
			t.Fatalf("error %v, want one wrapping ErrNotRewindable", err)
		}
		if len(seen.all()) != 1 {
			t.Fatalf("%d attempts, want 1", len(seen.all()))
		}
		e.wantRuns(t, 1)
	})
	t.Run("503", func(t *testing.T) {
		t.Parallel()
		var seen arrivals
		e := newEnv(t, setup{outer: seen.outer, server: []idempotency.ServerOption{idempotency.WithRetryAfter(0)}})
		e.store.Down.Store(true)
		client := newClient(t)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/orders", body())
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, do(t, client, req), http.StatusServiceUnavailable, idempotency.ErrStoreUnavailable.Reason)
		if len(seen.all()) != 1 {
			t.Fatalf("%d attempts, want 1", len(seen.all()))
		}
	})
}

// The request's context bounds the retries: a wait that would end after
// its deadline is not started, and the last answer comes back at once; a
// context cancelled during a wait ends the request with its error.
func TestTransportDeadline(t *testing.T) {
	t.Parallel()
	t.Run("wait past the deadline", func(t *testing.T) {
		t.Parallel()
		var seen arrivals
		e := newEnv(t, setup{outer: seen.outer, server: []idempotency.ServerOption{idempotency.WithRetryAfter(time.Minute)}})
		e.store.Down.Store(true)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		client := newClient(t)
		r := do(t, client, e.request(t, http.MethodPost, "/orders", `{"amount":1999}`).WithContext(ctx))
		if ctx.Err() != nil {
			t.Fatal("the request waited for its deadline")
		}
		wantProblem(t, r, http.StatusServiceUnavailable, idempotency.ErrStoreUnavailable.Reason)
		if len(seen.all()) != 1 {
			t.Fatalf("%d attempts, want 1", len(seen.all()))
		}
	})
	t.Run("cancelled during the wait", func(t *testing.T) {
		t.Parallel()
		var seen arrivals
		e := newEnv(t, setup{outer: seen.outer, server: []idempotency.ServerOption{idempotency.WithRetryAfter(0)}})
		e.store.Down.Store(true)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		client := newClient(t, httpidempotency.WithBackoff(func(context.Context, uint) time.Duration {
			cancel() // the caller gives up as the wait starts
			return time.Hour
		}))
		resp, err := client.Do(e.request(t, http.MethodPost, "/orders", `{"amount":1999}`).WithContext(ctx))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got %d, want the context's error", resp.StatusCode)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if len(seen.all()) != 1 {
			t.Fatalf("%d attempts, want 1", len(seen.all()))
		}
	})
}
