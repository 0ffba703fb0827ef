package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
)

// hook stops a call at the kill point (the call of a key that begins with
// keys, when keys is set): it writes the point's line and
// blocks the call for good, until the test kills the process. As the
// idempotency server's observer, it keeps the last decision reported for
// each key, lease renewals left out (one may be reported after the
// outcome is stored), which the line carries.
type hook struct {
	at   killpoint.Point
	keys string
	out  io.Writer

	mu        sync.Mutex
	decisions map[string]idempotency.Decision // by client key
}

// Observe implements [idempotency.Observer].
func (h *hook) Observe(_ context.Context, e idempotency.Event) {
	if e.Key == "" || e.Decision == idempotency.DecisionLeaseRenewed {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.decisions == nil {
		h.decisions = make(map[string]idempotency.Decision)
	}
	h.decisions[e.Key] = e.Decision
}

// reach stops the call of key when p is the kill point.
func (h *hook) reach(p killpoint.Point, key string) {
	if p != h.at || !strings.HasPrefix(key, h.keys) {
		return
	}
	h.mu.Lock()
	d, ok := h.decisions[key]
	h.mu.Unlock()
	s := killpoint.Stop{Point: p, Key: key}
	if ok {
		s.Decision = d.String()
	}
	h.println(killpoint.At(s))
	select {} // until SIGKILL
}

// afterComplete is the interceptor outside the idempotency interceptor:
// by the time that one returns an answer, it has stored the outcome.
func (h *hook) afterComplete(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err == nil {
		h.reach(killpoint.AfterComplete, req.(*wrapperspb.StringValue).GetValue())
	}
	return resp, err
}

// println writes one line of the protocol to the test.
func (h *hook) println(line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = fmt.Fprintln(h.out, line)
}
