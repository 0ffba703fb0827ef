package postgresstore

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// State values in the state column.
const (
	stateInFlight  = 1
	stateCompleted = 2
)

// statements are the store's SQL, one statement per step, for one table.
// Times come from the database's clock_timestamp() (the time the
// expression is evaluated, not the start of the transaction), never from
// the servers' wall clocks; the sweep alone uses statement_timestamp(). Leases and retentions are passed in
// microseconds ($n::bigint).
type statements struct {
	claim, complete, completeTx, release, extend, sweep string

	// held and whereAmI tell why a CompleteTx changed no row (see
	// Store.notCompleted).
	held, whereAmI string
}

func newStatements(table pgx.Identifier) statements {
	t := table.Sanitize()
	r := strings.NewReplacer("{t}", t)
	return statements{
		// claim returns the key's live completed row as it reads it, or
		// else inserts a new in-flight row, or, when the key has a row,
		// locks it (waiting for a transaction that holds it) and takes it
		// over when it has expired, else rewrites it unchanged so that
		// RETURNING gives the existing row. It always returns one row:
		// won tells whether the row carries this claim's token.
		//
		// A replay is read-only: when the first CTE finds a live
		// completed row, the INSERT's source is empty, so the statement
		// writes nothing, takes no row lock, is assigned no transaction
		// id and commits without a WAL flush. Returning that row from the
		// statement's snapshot is safe because nothing changes a live
		// completed row but a resend of its own completion, which leaves
		// it as it is. Any other row (none, in flight, expired, or
		// completed after the snapshot was taken) goes to the INSERT …
		// ON CONFLICT, as it always did.
		//
		// Takeover is judged by one clock reading, the one the new lease
		// is computed from (excluded.expires_at minus the lease), so that
		// every column agrees. That reading is taken before any wait for
		// the row lock, so it only errs towards not taking over a lease
		// that ran out during the wait. The first CTE reads the clock
		// once more, earlier, only to decide whether a completed row is
		// still live.
		claim: r.Replace(`
WITH live AS (
	SELECT state, fingerprint, data FROM {t}
	WHERE key = $1 AND state = 2 AND expires_at > clock_timestamp()
), claimed AS (
	INSERT INTO {t} AS r (key, state, token, fingerprint, expires_at)
	SELECT $1::bytea, 1, $2::bytea, $3::bytea, clock_timestamp() + $4::bigint * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM live)
	ON CONFLICT (key) DO UPDATE SET
		state       = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.state ELSE r.state END,
		token       = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.token ELSE r.token END,
		fingerprint = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.fingerprint ELSE r.fingerprint END,
		data        = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN NULL ELSE r.data END,
		expires_at  = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.expires_at ELSE r.expires_at END
	RETURNING r.token = $2 AS won, r.state, r.fingerprint, r.data
)
SELECT false, state, fingerprint, data FROM live
UNION ALL
SELECT won, state, fingerprint, data FROM claimed`),

		// complete stores the outcome while the token owns the live
		// in-flight row. The token that completed the row may send it
		// again (a resend after a lost reply): the row matches and is
		// rewritten unchanged, so the step reports success.
		complete: r.Replace(`
UPDATE {t} SET
	data       = CASE WHEN state = 1 THEN $3 ELSE data END,
	expires_at = CASE WHEN state = 1 THEN clock_timestamp() + $4::bigint * interval '1 microsecond' ELSE expires_at END,
	state      = 2
WHERE key = $1 AND token = $2 AND expires_at > clock_timestamp()`),

		// completeTx is complete inside a handler's transaction: only an
		// in-flight row, so that a second transaction of the same call
		// cannot commit side effects under an outcome already recorded.
		completeTx: r.Replace(`
UPDATE {t} SET data = $3, expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond', state = 2
WHERE key = $1 AND token = $2 AND state = 1 AND expires_at > clock_timestamp()`),

		// release deletes the token's in-flight row (live or expired: an
		// expired one is garbage either way), and answers true when it
		// did, or when the key holds no live row: nothing left to
		// release. It answers false for another owner's live row or a
		// live completed one, which it leaves alone.
		release: r.Replace(`
WITH released AS (
	DELETE FROM {t} WHERE key = $1 AND token = $2 AND state = 1 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM released)
	OR NOT EXISTS (SELECT 1 FROM {t} WHERE key = $1 AND expires_at > clock_timestamp())`),

		// extend sets the lease of the token's live in-flight row.
		extend: r.Replace(`
UPDATE {t} SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE key = $1 AND token = $2 AND state = 1 AND expires_at > clock_timestamp()`),

		// held answers whether the token still holds the key's live
		// in-flight row, with the database and the table ($3, the name
		// the store uses) that the connection sees.
		held: r.Replace(`
SELECT EXISTS (
	SELECT 1 FROM {t} WHERE key = $1 AND token = $2 AND state = 1 AND expires_at > clock_timestamp()
), current_database(), to_regclass($3::text)::oid::bigint`),

		// whereAmI returns the database and the table ($1, the name the
		// store uses) that the connection sees.
		whereAmI: `SELECT current_database(), to_regclass($1::text)::oid::bigint`,

		// sweep deletes up to $1 expired rows, oldest first, skipping rows
		// another transaction holds (a claim taking one over, a handler's
		// transaction, another server's sweep). The row lock rechecks
		// expires_at on the newest version of a row that changed since
		// the statement began, so a row taken over meanwhile is kept.
		// statement_timestamp() is stable within the statement, so the
		// planner bounds the expires_at index scan with it; the volatile
		// clock_timestamp() would be a filter on every row of the table.
		// Being the statement's start, it can only keep more rows.
		sweep: r.Replace(`
DELETE FROM {t} WHERE key IN (
	SELECT key FROM {t}
	WHERE expires_at <= statement_timestamp()
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)`),
	}
}
