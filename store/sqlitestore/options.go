package sqlitestore

import (
	"fmt"
	"strings"
	"time"
)

// Defaults of a [Store] built by [New].
const (
	// DefaultTable is the table a Store uses unless [WithTable] says
	// otherwise, in the connection's main database.
	DefaultTable = "idempotency_records"
	// DefaultSweepInterval is how often the sweeper runs unless
	// [WithSweepInterval] says otherwise.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is how many expired rows one sweep statement
	// deletes at most unless [WithSweepBatch] says otherwise.
	DefaultSweepBatch = 1000
	// DefaultInvalidationInterval is how often a subscription of
	// [Store.Invalidations] reads the purge log unless
	// [WithInvalidationInterval] says otherwise.
	DefaultInvalidationInterval = time.Second
)

// Option configures a [Store] built by [New].
type Option func(*config)

type config struct {
	table         []string // the table's name, and its schema first when given
	sweepInterval time.Duration
	sweepBatch    int
	sweepReport   func(deleted int64, err error)
	// invalidationInterval is the time between two reads of the purge
	// log by one subscription.
	invalidationInterval time.Duration
	ungated              bool   // tests only: no in-process write gate
	purgeRead            func() // tests only: runs between Purge's read and its delete
	err                  error
}

func newConfig(opts []Option) config {
	c := config{
		table:         []string{DefaultTable},
		sweepInterval: DefaultSweepInterval,
		sweepBatch:    DefaultSweepBatch,

		invalidationInterval: DefaultInvalidationInterval,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithTable sets the table the store keeps its rows in: "name", in the
// connection's main database, or "schema.name", in a database attached
// under that schema name. Each part is quoted as written, in double
// quotes, so it may hold any character but the dot that separates the two
// parts. Default [DefaultTable] ("idempotency_records"). [New] panics on
// an empty part or more than one dot.
func WithTable(name string) Option {
	return func(c *config) {
		parts := strings.Split(name, ".")
		for _, p := range parts {
			if p == "" {
				c.err = fmt.Errorf("sqlitestore: WithTable(%q): want \"name\" or \"schema.name\", each part non-empty", name)
				return
			}
		}
		if len(parts) > 2 {
			c.err = fmt.Errorf("sqlitestore: WithTable(%q): want \"name\" or \"schema.name\", each part non-empty", name)
			return
		}
		c.table = parts
	}
}

// WithSweepInterval sets how often the store's background sweeper deletes
// expired rows; each run deletes batch after batch ([WithSweepBatch])
// until none is left or the next run is due. Default
// [DefaultSweepInterval] (one minute), with up to 10% of random jitter so
// that several processes on one file do not sweep in step. Zero or less
// turns the sweeper off, for deployments that call [Store.Sweep]
// themselves.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) { c.sweepInterval = d }
}

// WithSweepBatch sets how many expired rows one sweep statement deletes at
// most, which bounds how long it holds the database's write lock. Default
// [DefaultSweepBatch] (1000); zero or less keeps the default.
func WithSweepBatch(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.sweepBatch = n
		}
	}
}

// WithSweepReport sets a function the background sweeper calls after each
// sweep statement with the number of rows it deleted, or its error (a
// missing table before [Store.Migrate] has run). Default: none; the
// sweeper tries again at its next run either way. The function must not
// block.
func WithSweepReport(f func(deleted int64, err error)) Option {
	return func(c *config) { c.sweepReport = f }
}

// WithInvalidationInterval sets how often each subscription of
// [Store.Invalidations] reads the purge log, which bounds how long a
// purge takes to reach the replay caches of the processes on the file:
// one interval and a read after the purge's commit. Each read is one
// statement through the log's primary key, which no writer waits for.
// Default [DefaultInvalidationInterval] (one second); zero or less keeps
// the default.
func WithInvalidationInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.invalidationInterval = d
		}
	}
}

// quoteTable returns the table's name quoted: "name" or "schema"."name".
func quoteTable(parts []string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = quoteIdent(p)
	}
	return strings.Join(q, ".")
}

// quoteIdent quotes one identifier in double quotes.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
