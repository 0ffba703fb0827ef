package postgresstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Invalidator = (*Store)(nil)

// Reconnection delays of Invalidations, while the database cannot be
// reached.
const (
	relistenMin = 100 * time.Millisecond
	relistenMax = 5 * time.Second
)

// Invalidations implements [store.Invalidator.Invalidations] with LISTEN
// and NOTIFY: [Store.Purge] notifies the key it deleted (in hex) on the
// channel of the table, "idempotency_purged_" and 16 hex digits of a
// SHA-256 of the table's schema-qualified name as the catalog holds it,
// resolved through the search_path of the store's connections. Stores
// that spell one table differently ([WithTable] "t", found through the
// search_path, and "public.t") therefore share one channel, and a purge
// through either reaches the other's subscribers. Each subscription
// resolves the channel through the pool when it listens (an error when the
// table does not exist: run [Store.Migrate] first) and holds a connection
// of its own, opened with the pool's
// connection settings (or those of [WithListenConfig]) but outside the
// pool, so that it takes none of the pool's connections. It returns once
// LISTEN has run, so that a purge committed after it returns is
// delivered, and an error when it cannot connect or listen.
//
// LISTEN needs a session of its own: through PgBouncer in transaction
// pooling mode, notifications do not arrive. Point [WithListenConfig] at
// PostgreSQL itself there.
//
// PostgreSQL queues notifications for a connection that is slow to read
// them, so a slow subscriber delays them but loses none. A connection
// that breaks loses those sent while it was down: the subscription
// connects again (retrying every 100 ms to 5 s) and, once it listens
// again, delivers an Invalidation with All set. A purge of a key over
// 3,999 bytes, which a notification cannot carry, is delivered as All.
func (s *Store) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgresstore: listen for the purges of %s: %w", s.table, err)
	}
	out := make(chan store.Invalidation)
	go func() {
		defer close(out)
		s.forwardPurges(ctx, conn, out)
	}()
	return out, nil
}

// listen resolves the channel of the table's purges, opens a connection
// with the pool's settings, or those of WithListenConfig, and listens on
// the channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.cfg.listen
	if cfg == nil {
		cfg = s.pool.Config().ConnConfig
	}
	channel, err := s.channel(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// channel returns the channel of the purges of the store's table,
// resolved through a connection of the pool, whose search_path the
// store's statements use (a connection of WithListenConfig may have
// another).
func (s *Store) channel(ctx context.Context) (string, error) {
	var channel string
	if err := s.pool.QueryRow(ctx, "SELECT "+channelSQL("$1"), s.table).Scan(&channel); err != nil {
		return "", err
	}
	return channel, nil
}

// forwardPurges delivers the notifications of conn to out until ctx is
// done, listening again on a new connection when conn breaks.
func (s *Store) forwardPurges(ctx context.Context, conn *pgx.Conn, out chan<- store.Invalidation) {
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if ctx.Err() != nil {
			return
		}
		var inv store.Invalidation
		if err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			if conn = s.relisten(ctx); conn == nil {
				return
			}
			inv.All = true // notifications sent meanwhile are lost
		} else {
			key, err := hex.DecodeString(n.Payload)
			inv = store.Invalidation{Key: string(key), All: err != nil || n.Payload == ""}
			if inv.All {
				inv.Key = ""
			}
		}
		select {
		case out <- inv:
		case <-ctx.Done():
			return
		}
	}
}

// relisten connects and listens again, retrying with a growing delay; it
// returns nil once ctx is done.
func (s *Store) relisten(ctx context.Context) *pgx.Conn {
	for delay := relistenMin; ; delay = min(2*delay, relistenMax) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		if conn, err := s.listen(ctx); err == nil {
			return conn
		}
	}
}
