package postgresstore

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// State values in the state column. An abandoned row is in flight (1)
// with a keep and a lease that ran out: a state computed when read.
const (
	stateInFlight  = 1
	stateCompleted = 2
)

// statements are the store's SQL, one statement per step, for one table.
// Times come from the database's clock_timestamp() (the time the
// expression is evaluated, not the start of the transaction), never from
// the servers' wall clocks; the sweep alone uses statement_timestamp().
// Leases, keeps and retentions are passed in microseconds ($n::bigint).
type statements struct {
	claim, complete, completeTx, release, releaseFresh, extend, abandon, sweep string

	// held and whereAmI tell why a CompleteTx changed no row (see
	// Store.notCompleted).
	held, whereAmI string
}

// leaseEnd is the SQL of the end of the lease of a row (its columns
// prefixed with prefix): expires_at, less the keep of a row claimed with
// one. The interval has no day or month part, so the subtraction is exact
// whatever the session's time zone.
func leaseEnd(prefix string) string {
	return "(" + prefix + "expires_at - " + prefix + "keep_micros * interval '1 microsecond')"
}

func newStatements(table pgx.Identifier) statements {
	t := table.Sanitize()
	r := strings.NewReplacer(
		"{t}", t,
		// The row r has expired (its lease, keep or retention ran out)
		// by the claim's clock.
		"{expired}", "r.expires_at <= (SELECT now FROM clock)",
		// The row r is abandoned with the claim's fingerprint, and the
		// claim takes abandoned rows over ($6).
		"{takeover}", "($6::boolean AND r.state = 1 AND r.keep_micros > 0 AND "+leaseEnd("r.")+" <= (SELECT now FROM clock) AND r.fingerprint = $3::bytea)",
		"{lease_end}", leaseEnd("r."),
		"{own_lease_end}", leaseEnd(""),
	)
	return statements{
		// claim returns the key's live completed row as it reads it, or
		// else inserts a new in-flight row, or, when the key has a row,
		// locks it (waiting for a transaction that holds it) and takes it
		// over when it has expired, or, with $6 (TakeOver), when it is
		// abandoned with the claim's fingerprint, else rewrites it
		// unchanged so that RETURNING gives the existing row. It always
		// returns one row: won tells whether the row carries this claim's
		// token; abandoned whether an in-flight row's lease has run out
		// (its keep has not); attempt and previous_token are those of the
		// row as it is now.
		//
		// A replay is read-only: when the first CTE finds a live
		// completed row, the INSERT's source is empty, so the statement
		// writes nothing, takes no row lock, is assigned no transaction
		// id and commits without a WAL flush. Returning that row from the
		// statement's snapshot is safe because nothing changes a live
		// completed row but a resend of its own completion, which leaves
		// it as it is. Any other row (none, in flight, abandoned,
		// expired, or completed after the snapshot was taken) goes to
		// the INSERT … ON CONFLICT, as it always did.
		//
		// Takeover is judged by one clock reading (the CTE clock, which
		// the new lease is computed from too), so that every column, and
		// the abandoned flag returned, agree. That reading is taken
		// before any wait for the row lock, so it only errs towards not
		// taking over a lease that ran out during the wait. The first CTE
		// reads the clock once more, earlier, only to decide whether a
		// completed row is still live.
		//
		// A take-over of an abandoned row keeps its fingerprint and its
		// keep_micros (an entry keeps the keep of the claim that made
		// it), counts one more attempt, and records the abandoned
		// owner's token in previous_token, since RETURNING sees only the
		// new row. A claim without a keep ($5 = 0) writes keep_micros 0,
		// attempt 1 and no previous_token: its row is a version 1 row.
		claim: r.Replace(`
WITH live AS (
	SELECT state, fingerprint, data FROM {t}
	WHERE key = $1 AND state = 2 AND expires_at > clock_timestamp()
), clock AS (
	SELECT clock_timestamp() AS now
), claimed AS (
	INSERT INTO {t} AS r (key, state, token, fingerprint, expires_at, keep_micros, attempt, previous_token)
	SELECT $1::bytea, 1, $2::bytea, $3::bytea, now + ($4::bigint + $5::bigint) * interval '1 microsecond', $5::bigint, 1, NULL FROM clock
	WHERE NOT EXISTS (SELECT 1 FROM live)
	ON CONFLICT (key) DO UPDATE SET
		state          = CASE WHEN {expired} THEN excluded.state ELSE r.state END,
		token          = CASE WHEN {expired} OR {takeover} THEN excluded.token ELSE r.token END,
		fingerprint    = CASE WHEN {expired} THEN excluded.fingerprint ELSE r.fingerprint END,
		data           = CASE WHEN {expired} THEN NULL ELSE r.data END,
		expires_at     = CASE WHEN {expired} THEN excluded.expires_at
			WHEN {takeover} THEN (SELECT now FROM clock) + ($4::bigint + r.keep_micros) * interval '1 microsecond'
			ELSE r.expires_at END,
		keep_micros    = CASE WHEN {expired} THEN excluded.keep_micros ELSE r.keep_micros END,
		attempt        = CASE WHEN {expired} THEN 1 WHEN {takeover} THEN r.attempt + 1 ELSE r.attempt END,
		previous_token = CASE WHEN {expired} THEN NULL WHEN {takeover} THEN r.token ELSE r.previous_token END
	RETURNING r.token = $2 AS won, r.state, r.fingerprint, r.data,
		r.state = 1 AND r.keep_micros > 0 AND {lease_end} <= (SELECT now FROM clock) AS abandoned,
		r.attempt, r.previous_token
)
SELECT false, state, fingerprint, data, false, 0, NULL::bytea FROM live
UNION ALL
SELECT won, state, fingerprint, data, abandoned, attempt, previous_token FROM claimed`),

		// complete stores the outcome while the token owns the live
		// in-flight row, abandoned or not: an abandoned row lives until
		// its keep runs out (expires_at), and the late outcome of its
		// owner is worth keeping. The token that completed the row may
		// send it again (a resend after a lost reply): the row matches
		// and is rewritten unchanged, so the step reports success.
		complete: r.Replace(`
UPDATE {t} SET
	data       = CASE WHEN state = 1 THEN $3 ELSE data END,
	expires_at = CASE WHEN state = 1 THEN clock_timestamp() + $4::bigint * interval '1 microsecond' ELSE expires_at END,
	state      = 2
WHERE key = $1 AND token = $2 AND expires_at > clock_timestamp()`),

		// completeTx is complete inside a handler's transaction: only an
		// in-flight row (abandoned or not, as for complete), so that a
		// second transaction of the same call cannot commit side effects
		// under an outcome already recorded.
		completeTx: r.Replace(`
UPDATE {t} SET data = $3, expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond', state = 2
WHERE key = $1 AND token = $2 AND state = 1 AND expires_at > clock_timestamp()`),

		// release deletes the token's in-flight row (live, abandoned or
		// expired: an expired one is garbage either way), and answers
		// true when it did, or when the key holds no live row: nothing
		// left to release. It answers false for another owner's live row or a
		// live completed one, which it leaves alone. The live row is
		// looked for FOR KEY SHARE: a plain read would see the row as the
		// statement's snapshot holds it, so a release whose DELETE waited
		// for another step that deleted the row (a purge, the same
		// release resent, an abandon) found it still there and answered
		// false; the lock waits for a DELETE under way and skips a
		// deleted row, and waits for no update (a handler's CompleteTx).
		// A row updated since the snapshot (a completion, a take-over) is
		// live either way (decision 319).
		release: r.Replace(`
WITH released AS (
	DELETE FROM {t} WHERE key = $1 AND token = $2 AND state = 1 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM released)
	OR NOT EXISTS (SELECT 1 FROM {t} WHERE key = $1 AND expires_at > clock_timestamp() FOR KEY SHARE)`),

		// releaseFresh deletes the token's in-flight row when it is
		// attempt 1: the undo of a failed claim that may have taken an
		// abandoned entry over, which only a row of attempt 1 did not.
		releaseFresh: r.Replace(`
DELETE FROM {t} WHERE key = $1 AND token = $2 AND state = 1 AND attempt = 1`),

		// extend sets the lease of the token's in-flight row while its
		// lease runs, and keeps its keep beyond the new lease: an
		// abandoned row stays abandoned.
		extend: r.Replace(`
UPDATE {t} SET expires_at = clock_timestamp() + ($3::bigint + keep_micros) * interval '1 microsecond'
WHERE key = $1 AND token = $2 AND state = 1 AND {own_lease_end} > clock_timestamp()`),

		// abandon ends the lease of the token's live in-flight row now:
		// a row claimed with a keep then lives its keep from now, as
		// abandoned (one already abandoned is left as it is), and one
		// claimed without is deleted. It answers whether the token owned
		// such a row. The two parts match disjoint rows (by keep_micros,
		// which no step of an owner changes), so at most one of them
		// changes the key's row.
		abandon: r.Replace(`
WITH deleted AS (
	DELETE FROM {t}
	WHERE key = $1 AND token = $2 AND state = 1 AND keep_micros = 0 AND expires_at > clock_timestamp()
	RETURNING 1
), ended AS (
	UPDATE {t} SET expires_at = CASE
		WHEN {own_lease_end} > clock_timestamp() THEN clock_timestamp() + keep_micros * interval '1 microsecond'
		ELSE expires_at END
	WHERE key = $1 AND token = $2 AND state = 1 AND keep_micros > 0 AND expires_at > clock_timestamp()
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM deleted) OR EXISTS (SELECT 1 FROM ended)`),

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
