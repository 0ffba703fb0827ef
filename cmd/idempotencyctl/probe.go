package main

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// A store reached directly is found by flags the operator may have left
// at their defaults: a key not found there may be one the server keeps
// under another prefix or table. A probe looks, cheaply, whether the place
// the flags name holds anything at all.

// emptiness is what a probe found: that the place holds something (or
// that it could not tell), that it holds nothing, or that it does not
// exist.
type emptiness int

const (
	holdsSomething emptiness = iota // or unknown
	holdsNothing
	doesNotExist
)

// place names where a store reached directly was looked in, for the hints
// of a key not found there: the flag and option that set it, and a probe.
type place struct {
	what   string // `prefix "idempotency:"`, `table idempotency_records`
	flag   string // --redis-prefix, --table
	option string // redisstore.WithPrefix, postgresstore.WithTable
	probe  func(context.Context) emptiness
}

// redisScanLimit bounds the SCAN calls of a Redis probe per node: a key
// space that large is not called empty, only not known to be.
const redisScanLimit = 200

// redisPlace is the place of a Redis store under prefix.
func redisPlace(rdb redis.UniversalClient, prefix string) *place {
	return &place{
		what: "prefix " + strconv.Quote(prefix), flag: "--redis-prefix", option: "redisstore.WithPrefix",
		probe: func(ctx context.Context) emptiness {
			errFound := errors.New("found")
			errUnknown := errors.New("unknown")
			pattern := globEscape(prefix) + "*"
			scan := func(ctx context.Context, c *redis.Client) error {
				var cursor uint64
				for range redisScanLimit {
					keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
					switch {
					case err != nil:
						return err
					case len(keys) > 0:
						return errFound
					case next == 0:
						return nil
					}
					cursor = next
				}
				return errUnknown
			}
			var err error
			switch c := rdb.(type) {
			case *redis.ClusterClient:
				err = c.ForEachMaster(ctx, scan)
			case *redis.Client:
				err = scan(ctx, c)
			default:
				return holdsSomething
			}
			if err == nil {
				return holdsNothing
			}
			return holdsSomething
		},
	}
}

// globEscape escapes the characters SCAN's MATCH pattern reads.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// postgresPlace is the place of a PostgreSQL store in table.
func postgresPlace(pool *pgxpool.Pool, table string) *place {
	ident := pgx.Identifier(strings.Split(table, ".")).Sanitize()
	return &place{
		what: "table " + table, flag: "--table", option: "postgresstore.WithTable",
		probe: func(ctx context.Context) emptiness {
			var exists bool
			if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident).Scan(&exists); err != nil {
				return holdsSomething
			}
			if !exists {
				return doesNotExist
			}
			var nonEmpty bool
			if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+ident+")").Scan(&nonEmpty); err != nil || nonEmpty {
				return holdsSomething
			}
			return holdsNothing
		},
	}
}

// mysqlPlace is the place of a MySQL store in table.
func mysqlPlace(db *sql.DB, table, where string) *place {
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return &place{
		what: "table " + table + where, flag: "--table", option: "mysqlstore.WithTable",
		probe: func(ctx context.Context) emptiness {
			var one int
			err := db.QueryRowContext(ctx, "SELECT 1 FROM "+strings.Join(parts, ".")+" LIMIT 1").Scan(&one)
			var me *mysql.MySQLError
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return holdsNothing
			case errors.As(err, &me) && me.Number == 1146: // ER_NO_SUCH_TABLE
				return doesNotExist
			}
			return holdsSomething
		},
	}
}

// sqlitePlace is the place of a SQLite store in table, of the file's
// main database. SQLite matches table names without regard to ASCII case.
func sqlitePlace(db *sql.DB, table, where string) *place {
	ident := `"` + strings.ReplaceAll(table, `"`, `""`) + `"`
	return &place{
		what: "table " + table + where, flag: "--table", option: "sqlitestore.WithTable",
		probe: func(ctx context.Context) emptiness {
			var exists bool
			err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE)", table).Scan(&exists)
			if err != nil {
				return holdsSomething
			}
			if !exists {
				return doesNotExist
			}
			var nonEmpty bool
			if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM main."+ident+")").Scan(&nonEmpty); err != nil || nonEmpty {
				return holdsSomething
			}
			return holdsNothing
		},
	}
}

// hint says, for a key not found in p (or a store failing there), where
// it was looked for, and what the probe found there.
func (p *place) hint(ctx context.Context, notFound bool) string {
	found := p.probe(ctx)
	var b strings.Builder
	switch found {
	case doesNotExist:
		b.WriteString("(the " + p.what + " does not exist: this is not where the server's store is; give the server's (" + p.option + ") with " + p.flag + ")")
	case holdsNothing:
		b.WriteString("(the " + p.what + " holds nothing at all: this is not where the server's store is, or the store is empty; give the server's (" + p.option + ") with " + p.flag + " before reading \"not found\" as \"expired\")")
	default:
		if !notFound {
			return ""
		}
		b.WriteString("(looked in the " + p.what + ": a server whose store has another (" + p.option + ") keeps its keys there, not here: give it with " + p.flag + ")")
	}
	return b.String()
}
