// Package testkit holds the test helpers that the root package's tests and
// the integration module's backend tests share: an observer that counts
// outcomes, the checks of an error's ErrorInfo, and a server interceptor
// called as a function. It needs nothing but grpc, so the core module can
// hold it and every module of the repository can import it.
package testkit

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// WithKey returns ctx with key as the outgoing idempotency key.
func WithKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

// Events records observer events.
type Events struct {
	mu sync.Mutex
	ev []idempotency.Event
}

// Observe records ev.
func (e *Events) Observe(_ context.Context, ev idempotency.Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
}

// All returns the events recorded so far, in order.
func (e *Events) All() []idempotency.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ev)
}

// Count returns how many recorded events have outcome o.
func (e *Events) Count(o idempotency.Decision) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.ev {
		if ev.Decision == o {
			n++
		}
	}
	return n
}

// ErrorInfo returns the ErrorInfo and RetryInfo details of err.
func ErrorInfo(err error) (*errdetails.ErrorInfo, *errdetails.RetryInfo) {
	var ei *errdetails.ErrorInfo
	var ri *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			ei = d
		case *errdetails.RetryInfo:
			ri = d
		}
	}
	return ei, ri
}

// WantReason fails the test unless err has code and the ErrorInfo reason.
func WantReason(t testing.TB, err error, code codes.Code, reason string) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code = %v (%v), want %v", got, err, code)
	}
	ei, _ := ErrorInfo(err)
	if ei == nil || ei.GetReason() != reason || ei.GetDomain() != idempotency.ErrorDomain {
		t.Fatalf("ErrorInfo = %v, want reason %s in domain %s", ei, reason, idempotency.ErrorDomain)
	}
}

// ClientReason returns the ErrorInfo reason of err in the library's
// domain, or "".
func ClientReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idempotency.ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}

// WaitFor polls cond until it holds or the test's deadline nears.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
