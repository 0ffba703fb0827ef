package httpidempotency_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

// liveKey carries the live request's context to the handler, whose own
// context is detached from it.
type liveKey struct{}

// A client leaves, then its handler, running on detached, writes its
// answer: the connection refuses the bytes, but the whole answer is
// stored, and the retry gets all of it replayed, never the part the dead
// connection accepted.
func TestDetachedAnswerStoredWhole(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	tests := []struct {
		name  string
		write func(w http.ResponseWriter) error
	}{
		{"one write", func(w http.ResponseWriter) error { _, err := w.Write(body); return err }},
		{"io.Copy, which stops at the first error", func(w http.ResponseWriter) error {
			_, err := io.Copy(w, struct{ io.Reader }{bytes.NewReader(body)}) // 32 KiB writes
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{})
			wrote := make(chan error, 1)
			e := newEnv(t, setup{
				outer: func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), liveKey{}, r.Context())))
					})
				},
				handler: func(w http.ResponseWriter, r *http.Request) {
					close(started)
					<-r.Context().Value(liveKey{}).(context.Context).Done() // the server saw the client leave
					w.Header().Set("Content-Type", "application/octet-stream")
					wrote <- tt.write(w)
				},
			})
			ctx, cancel := context.WithCancel(t.Context())
			gone := make(chan error, 1)
			go func() {
				resp, err := e.http.Do(e.request(t, http.MethodPost, "/export", "", "k").WithContext(ctx))
				if err == nil {
					resp.Body.Close()
				}
				gone <- err
			}()
			<-started
			cancel()
			if err := <-gone; err == nil {
				t.Fatal("the client got an answer")
			}
			if err := <-wrote; err != nil {
				t.Errorf("the detached handler's write failed: %v", err)
			}
			wait.For(t, func() bool { return e.store.Count("complete") == 1 })
			r := e.post(t, "/export", "", "k")
			if r.Status != http.StatusOK || r.Body != string(body) || r.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry: %d, %d bytes, replayed %q; want 200 with the %d bytes the handler wrote, replayed",
					r.Status, len(r.Body), r.Header.Get("Idempotent-Replayed"), len(body))
			}
			if cl := r.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %s, want %d", cl, len(body))
			}
			e.wantRuns(t, 1)
		})
	}
}

// A duplicate waiting for the key in flight (WithWaitForInFlight) whose
// request context ends first, at a deadline a layer in front set, gets
// 409 with Retry-After: its client is still there, and must not get an
// empty success while the original runs.
func TestWaitPastOuterDeadline(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	e := newEnv(t, setup{
		handler: func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release // until the duplicate has its answer
			created(w, r)
		},
		server: []idempotency.ServerOption{idempotency.WithWaitForInFlight(time.Minute)},
		outer: func(next http.Handler) http.Handler { // a timeout layer
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if d, err := time.ParseDuration(r.Header.Get("X-Timeout")); err == nil {
					ctx, cancel := context.WithTimeout(r.Context(), d)
					defer cancel()
					r = r.WithContext(ctx)
				}
				next.ServeHTTP(w, r)
			})
		},
	})
	t.Cleanup(free) // before the server closes, should the test fail
	first := make(chan response, 1)
	go func() { first <- e.post(t, "/orders", "{}", "k") }()
	<-started
	req := e.request(t, http.MethodPost, "/orders", "{}", "k")
	req.Header.Set("X-Timeout", "50ms")
	dup := e.send(t, req)
	wantProblem(t, dup, http.StatusConflict, idempotency.ErrKeyInUse.Reason)
	if got := dup.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	free()
	if r := <-first; r.Status != http.StatusCreated {
		t.Fatalf("the original: %d %s", r.Status, r.Body)
	}
	e.wantRuns(t, 1)
}
