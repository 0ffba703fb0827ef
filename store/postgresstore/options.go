package postgresstore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults of a [Store] built by [New].
const (
	// DefaultTable is the table a Store uses unless [WithTable] says
	// otherwise, found through the connection's search_path.
	DefaultTable = "idempotency_records"
	// DefaultSweepInterval is how often the sweeper runs unless
	// [WithSweepInterval] says otherwise.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is how many expired rows one sweep statement
	// deletes at most unless [WithSweepBatch] says otherwise.
	DefaultSweepBatch = 1000
)

// Option configures a [Store] built by [New].
type Option func(*config)

type config struct {
	table         pgx.Identifier
	sweepInterval time.Duration
	sweepBatch    int
	sweepReport   func(deleted int64, err error)
	listen        *pgx.ConnConfig // of Invalidations; nil: the pool's
	err           error
}

func newConfig(opts []Option) config {
	c := config{
		table:         pgx.Identifier{DefaultTable},
		sweepInterval: DefaultSweepInterval,
		sweepBatch:    DefaultSweepBatch,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithTable sets the table the store keeps its rows in: "name", found
// through the connection's search_path, or "schema.name". Each part is
// quoted as written (pgx.Identifier), so it is case-sensitive and may hold
// any character but the dot that separates the two parts. Default
// [DefaultTable] ("idempotency_records"). [New] panics on an empty part or
// more than one dot.
func WithTable(name string) Option {
	return func(c *config) {
		parts := strings.Split(name, ".")
		if len(parts) > 2 || slices.Contains(parts, "") {
			c.err = fmt.Errorf("postgresstore: WithTable(%q): want \"name\" or \"schema.name\"", name)
			return
		}
		c.table = pgx.Identifier(parts)
	}
}

// WithSweepInterval sets how often the store's background sweeper deletes
// expired rows; each run deletes batch after batch ([WithSweepBatch])
// until none is left or the next run is due. Default
// [DefaultSweepInterval] (one minute), with up to 10% of random jitter so
// that many servers do not sweep in step. Zero or less turns the sweeper
// off, for deployments that call [Store.Sweep] from a cron job instead.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) { c.sweepInterval = d }
}

// WithSweepBatch sets how many expired rows one sweep statement deletes at
// most, which bounds how long it holds row locks and how much WAL it
// writes at once. Default [DefaultSweepBatch] (1000); zero or less keeps
// the default.
func WithSweepBatch(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.sweepBatch = n
		}
	}
}

// WithSweepReport sets a function the background sweeper calls after each
// sweep statement with the number of rows it deleted, or its error (a
// missing table before [Store.Migrate] has run, an unreachable database).
// Default: none; the sweeper tries again at its next run either way. The
// function must not block.
func WithSweepReport(f func(deleted int64, err error)) Option {
	return func(c *config) { c.sweepReport = f }
}

// WithListenConfig sets the connection settings of the connections that
// [Store.Invalidations] opens to LISTEN, one per subscription. Default:
// the pool's (pool.Config().ConnConfig). Set it to reach PostgreSQL
// directly when the pool goes through PgBouncer in transaction pooling
// mode, where a LISTEN is not kept and notifications do not arrive.
func WithListenConfig(cfg *pgx.ConnConfig) Option {
	return func(c *config) { c.listen = cfg }
}
