package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver of database/sql
)

// Synchronous is SQLite's synchronous setting in WAL mode, which decides
// what survives a power loss (see the package documentation, Durability).
type Synchronous string

// The synchronous settings [Open] takes.
const (
	// SynchronousNormal syncs the write-ahead log at each checkpoint,
	// not at each commit: a commit costs no fsync. Everything the store
	// acknowledged survives a crash of the process; a power loss or an
	// operating system crash may roll back the transactions committed
	// since the last checkpoint (the database stays consistent: each is
	// there in full or not at all).
	SynchronousNormal Synchronous = "NORMAL"
	// SynchronousFull syncs the write-ahead log at each commit: nothing
	// the store acknowledged is lost to a crash of the process, of the
	// operating system or a power loss (given a disk that honours
	// fsync), at the cost of one fsync per write.
	SynchronousFull Synchronous = "FULL"
)

// Defaults of [Open].
const (
	// DefaultBusyTimeout is how long a statement waits for another
	// connection's or process's write lock before it fails with
	// SQLITE_BUSY, unless [WithBusyTimeout] says otherwise.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultSynchronous is the synchronous setting unless
	// [WithSynchronous] says otherwise.
	DefaultSynchronous = SynchronousFull
)

// OpenOption configures [Open].
type OpenOption func(*openConfig)

type openConfig struct {
	busy     time.Duration
	sync     Synchronous
	maxConns int
}

// WithSynchronous sets SQLite's synchronous setting: [SynchronousFull]
// (the default, [DefaultSynchronous]: nothing acknowledged is lost to a
// power loss) or [SynchronousNormal] (no fsync per commit; a power loss
// may roll back the last transactions). Any other value makes Open fail.
func WithSynchronous(s Synchronous) OpenOption {
	return func(c *openConfig) { c.sync = s }
}

// WithBusyTimeout sets how long a statement waits for the write lock that
// another connection or process holds before it fails with SQLITE_BUSY.
// Default [DefaultBusyTimeout] (5s); it is rounded down to whole
// milliseconds, and zero or less keeps the default.
func WithBusyTimeout(d time.Duration) OpenOption {
	return func(c *openConfig) {
		if d > 0 {
			c.busy = d
		}
	}
}

// WithMaxConns sets the pool's largest number of open connections.
// Default: 4 plus twice GOMAXPROCS, enough for concurrent reads (replays)
// beside one writer and the handlers' open transactions. Zero or less
// keeps the default.
func WithMaxConns(n int) OpenOption {
	return func(c *openConfig) {
		if n > 0 {
			c.maxConns = n
		}
	}
}

// Open opens the SQLite database file at path (created when missing) with
// the modernc.org/sqlite driver, set up as the store needs it, and
// returns the pool for [New] and for the application's own transactions
// ([Store.CompleteTx]). Every connection of the pool runs, before its
// first statement:
//
//   - PRAGMA busy_timeout ([WithBusyTimeout], default 5s): a write that
//     finds the write lock held, by another connection or another
//     process, waits for it rather than failing at once;
//   - PRAGMA journal_mode = WAL: readers never wait for the writer, nor
//     the writer for readers, and a commit appends to the write-ahead log;
//   - PRAGMA synchronous ([WithSynchronous], default FULL): see the
//     package documentation, Durability.
//
// Transactions begun on the pool are BEGIN IMMEDIATE (the driver's
// _txlock=immediate): they take the write lock when they begin, waiting
// for it under the busy timeout, rather than when they first write, where
// SQLite fails a transaction whose snapshot is stale with SQLITE_BUSY at
// once, without waiting. A read-only transaction (sql.TxOptions{ReadOnly:
// true}) begins DEFERRED and takes no lock a writer waits for.
//
// Open connects once before it returns, so that the file is in WAL mode
// (which the file keeps) before the pool opens its other connections:
// connections that switch a new file to WAL at once may fail with
// SQLITE_BUSY without waiting, as each waits for the others' lock. When
// another process is switching it at the same moment, Open tries again
// until the busy timeout. The caller closes the pool, after [Store.Close].
func Open(path string, opts ...OpenOption) (*sql.DB, error) {
	c := openConfig{busy: DefaultBusyTimeout, sync: DefaultSynchronous, maxConns: 4 + 2*runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(&c)
	}
	switch c.sync {
	case SynchronousNormal, SynchronousFull:
	default:
		return nil, fmt.Errorf("sqlitestore: open %s: synchronous %q: want NORMAL or FULL", path, c.sync)
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: open %q: want the path of a database file", path)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(c.busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+string(c.sync)+")")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(c.maxConns)
	db.SetMaxIdleConns(c.maxConns)
	if err := connect(db, c.busy); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	return db, nil
}

// connect opens db's first connection, trying again while it fails with
// SQLITE_BUSY, until busy has passed.
func connect(db *sql.DB, busy time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), busy)
	defer cancel()
	for {
		err := db.PingContext(ctx)
		if err == nil || !isBusy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// escapePath returns path as the path of a file: URI: the characters that
// a URI reads otherwise (%, ?, #) escaped.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}
