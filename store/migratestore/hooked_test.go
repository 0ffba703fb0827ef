package migratestore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// errDown is the error a hooked store fails a call with.
var errDown = errors.New("migratestore test: the store is down")

// hooked is a real memory store whose calls a test can fail, or precede
// with a step of its own: before a call of an operation ("claim",
// "complete", "release", "extend", "lookup", "purge"), the hook set for
// it runs, and an error the hook returns is the call's, without reaching
// the store. It is a decorator, not a fake: every call a hook lets
// through goes to the memory store underneath.
type hooked struct {
	*memorystore.Store

	mu    sync.Mutex
	hooks map[string]func() error
}

func newHooked(t *testing.T) *hooked { return &hooked{Store: newMemory(t)} }

// on sets the hook of op; nil removes it.
func (h *hooked) on(op string, hook func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hooks == nil {
		h.hooks = map[string]func() error{}
	}
	h.hooks[op] = hook
}

// fail makes every call of op fail with errDown, until on(op, nil).
func (h *hooked) fail(op string) { h.on(op, func() error { return errDown }) }

// once runs step before the next call of op only; the calls that step
// makes, and all later ones, go through.
func (h *hooked) once(op string, step func()) {
	var done atomic.Bool
	h.on(op, func() error {
		if done.CompareAndSwap(false, true) {
			step()
		}
		return nil
	})
}

func (h *hooked) before(op string) error {
	h.mu.Lock()
	hook := h.hooks[op]
	h.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook()
}

func (h *hooked) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	if err := h.before("claim"); err != nil {
		return store.ClaimResult{}, err
	}
	return h.Store.Claim(ctx, key, fp, lease, opts)
}

func (h *hooked) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	if err := h.before("complete"); err != nil {
		return err
	}
	return h.Store.Complete(ctx, key, token, data, retention)
}

func (h *hooked) Release(ctx context.Context, key, token string) error {
	if err := h.before("release"); err != nil {
		return err
	}
	return h.Store.Release(ctx, key, token)
}

func (h *hooked) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if err := h.before("extend"); err != nil {
		return err
	}
	return h.Store.Extend(ctx, key, token, lease)
}

func (h *hooked) Lookup(ctx context.Context, key string) (store.Info, error) {
	if err := h.before("lookup"); err != nil {
		return store.Info{}, err
	}
	return h.Store.Lookup(ctx, key)
}

func (h *hooked) Purge(ctx context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	if err := h.before("purge"); err != nil {
		return store.Info{}, err
	}
	return h.Store.Purge(ctx, key, opts)
}
