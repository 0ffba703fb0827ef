package idempotency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
)

// chaosProxy starts a fault proxy in front of target and closes it when
// the test ends (after the clients that use it, which are registered
// later and so closed first).
func chaosProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// chaosRedis returns a go-redis client for addr, closed when the test ends.
// contextTimeout sets ContextTimeoutEnabled, which makes go-redis bound its
// network I/O by the context's deadline instead of ReadTimeout alone.
func chaosRedis(t *testing.T, addr string, contextTimeout bool) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: contextTimeout,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// serverResults is an outer server interceptor that sends the idempotency
// interceptor's result on a channel, so a test knows when the server side
// of a call has finished, after the client has given up.
type serverResults chan error

func (r serverResults) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	select {
	case r <- err:
	default: // full: the test reads only the results it waits for
	}
	return resp, err
}

// signalStore decorates a store and closes completing the first time
// Complete is called, before the call goes through; it keeps the error of
// the last Complete.
type signalStore struct {
	store.Store
	completing chan struct{}
	once       sync.Once

	mu          sync.Mutex
	completeErr error
}

func newSignalStore(s store.Store) *signalStore {
	return &signalStore{Store: s, completing: make(chan struct{})}
}

// Complete implements store.Store.
func (s *signalStore) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	s.once.Do(func() { close(s.completing) })
	err := s.Store.Complete(ctx, key, token, data, retention)
	s.mu.Lock()
	s.completeErr = err
	s.mu.Unlock()
	return err
}

func (s *signalStore) lastCompleteErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completeErr
}

// callUntilNotInUse calls fn until its answer is not ABORTED with
// IDEMPOTENCY_KEY_IN_USE, pausing pause between attempts, and returns the
// last answer. It stops when ctx ends.
func callUntilNotInUse(ctx context.Context, pause time.Duration, fn func() (*testingv1.DoResponse, error)) (*testingv1.DoResponse, error) {
	for {
		resp, err := fn()
		if status.Code(err) != codes.Aborted || clientReason(err) != idempotency.ErrKeyInUse.Reason {
			return resp, err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}
