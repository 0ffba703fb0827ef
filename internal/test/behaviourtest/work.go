package behaviourtest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// act is what one execution of the work answers.
type act int

const (
	answer      act = iota // a response: "run n" (HTTP 200)
	refuse                 // a deterministic error: PERMISSION_DENIED "run n" (HTTP 422)
	flake                  // a retryable error: UNAVAILABLE "run n" (HTTP 503)
	crash                  // a panic
	bulky                  // a response over the size limit (HTTP 200)
	bulkyRefuse            // a deterministic error over the size limit (HTTP 422)
)

// hold is what one execution waits for before it answers.
type hold int

const (
	none    hold = iota
	gate         // until the step "open" opens the gate
	ctxDone      // until the work's own context ends
)

// run is the script of one execution of the work.
type run struct {
	act  act
	hold hold
}

// bulk is the size of a bulky answer: four times [sizeLimit].
const bulk = 4 * sizeLimit

// work is the work behind every entry point, run by the script of its
// situation: execution n (from 1) follows script[n-1], or answers when
// the script is shorter. It records which call each execution ran for,
// and how its context stood when it answered.
type work struct {
	script []run
	gate   chan struct{}
	// started receives the number of each execution as it starts.
	started chan int

	mu     sync.Mutex
	n      int
	ranFor map[string]int // call id -> execution
	causes []error        // context.Cause of each execution's context when it answered
}

func newWork(script []run) *work {
	return &work{script: script, gate: make(chan struct{}), started: make(chan int, 16), ranFor: map[string]int{}}
}

// exec runs one execution for the call id: it holds as scripted, and
// returns its number, what to answer and the text of the answer.
func (w *work) exec(ctx context.Context, id string) (n int, a act, text string) {
	w.mu.Lock()
	w.n++
	n = w.n
	w.ranFor[id] = n
	w.mu.Unlock()
	r := run{}
	if n <= len(w.script) {
		r = w.script[n-1]
	}
	w.started <- n
	switch r.hold {
	case gate:
		<-w.gate
	case ctxDone:
		<-ctx.Done()
	}
	w.mu.Lock()
	w.causes = append(w.causes, context.Cause(ctx))
	w.mu.Unlock()
	if r.act == crash {
		panic(fmt.Sprintf("behaviourtest: run %d panics", n))
	}
	text = fmt.Sprintf("run %d", n)
	if r.act == bulky || r.act == bulkyRefuse {
		text += strings.Repeat(".", bulk)
	}
	return n, r.act, text
}

// ran reports whether an execution ran for the call id.
func (w *work) ran(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.ranFor[id]
	return ok
}

// executions returns how many executions started, and the context cause
// of each one that answered.
func (w *work) executions() (int, []error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, append([]error(nil), w.causes...)
}

// Work runs one execution of the situation's work for the call id, on
// ctx, and returns its answer as a gRPC handler does: a response, or
// PERMISSION_DENIED (a deterministic error) or UNAVAILABLE (a retryable
// one) as the status error; a crash panics. An entry point's handler
// calls it with the id its call carries.
func (e *Env) Work(ctx context.Context, id string) (*testingv1.DoResponse, error) {
	n, a, text := e.work.exec(ctx, id)
	switch a {
	case refuse, bulkyRefuse:
		return nil, status.Error(codes.PermissionDenied, text)
	case flake:
		return nil, status.Error(codes.Unavailable, text)
	}
	return &testingv1.DoResponse{Payload: text, Execution: int64(n)}, nil
}
