package migratestore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Invalidator = (*Store)(nil)

// Invalidations merges the invalidations of the two stores, those of them
// that are a store.Invalidator: a purge through this Store purges both
// stores, so its key may arrive twice. It returns an error wrapping
// errors.ErrUnsupported when neither store is one, and the error of a
// store whose subscription fails (ending the other's).
func (s *Store) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	ctx, cancel := context.WithCancel(ctx)
	var chans []<-chan store.Invalidation
	for _, st := range []store.Store{s.to, s.from} {
		inv, ok := st.(store.Invalidator)
		if !ok {
			continue
		}
		ch, err := inv.Invalidations(ctx)
		if err != nil {
			cancel()
			return nil, err
		}
		chans = append(chans, ch)
	}
	if len(chans) == 0 {
		cancel()
		return nil, fmt.Errorf("migratestore: neither store is a store.Invalidator: %w", errors.ErrUnsupported)
	}
	out := make(chan store.Invalidation)
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Go(func() {
			for inv := range ch {
				select {
				case out <- inv:
				case <-ctx.Done():
				}
			}
		})
	}
	go func() {
		wg.Wait()
		cancel()
		close(out)
	}()
	return out, nil
}
