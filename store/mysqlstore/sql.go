package mysqlstore

import "strings"

// State values in the state column.
const (
	stateInFlight  = 1
	stateCompleted = 2
	// stateAbandoned is never written: the statements that read a row
	// report an in-flight row whose lease_until has passed as 3.
	stateAbandoned = 3
)

// Limits of the columns: a longer key or fingerprint is an argument error,
// checked before any statement is sent, so that a server without strict
// mode never truncates one into another's.
const (
	maxKey         = 255 // `key` VARBINARY(255)
	maxFingerprint = 255 // fingerprint VARBINARY(255)
)

// statements are the store's SQL, one statement per step, for one table.
// Times come from the database's clock, as UTC_TIMESTAMP(6) (whatever the
// session's time_zone), read once per statement at its start, never from
// the servers' wall clocks. Leases and retentions are passed in
// microseconds, and an expiry past DATETIME's range is saturated at its
// largest value.
type statements struct {
	// The claim: read first, then, for a key with no live row, insert or
	// take over, and for an abandoned row that a take-over may have,
	// resume. The read returns the session's isolation level too, read
	// from the variable the server has (see Store.readSQL): readTx from
	// tx_isolation (MariaDB before 11.1), read from
	// transaction_isolation (MySQL 8, MariaDB 11.1 and later).
	read, readTx, insert, takeover, resume string

	complete, completeTx, extend, abandon, release, expired, sweepPrefix string

	// completed, held, owned and live tell a step that changed no row why
	// (see Store.fenced).
	completed, held, owned, live string

	// whereAmI returns the connection's database, for a CompleteTx that
	// changed no row.
	whereAmI string
}

// sqlReplacer fills in the parts every statement shares.
func sqlReplacer(table string) *strings.Replacer {
	return strings.NewReplacer(
		"{t}", table,
		"{now}", "UTC_TIMESTAMP(6)",
		"{expiry}", "COALESCE(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, '9999-12-31 23:59:59.999999')",
		// {leaseUntil} is lease_until of a new claim: the end of its lease
		// when the claim keeps its entry (the first ?, Keep, is positive),
		// NULL otherwise (the second ? is the lease).
		"{leaseUntil}", "IF(? > 0, COALESCE(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, '9999-12-31 23:59:59.999999'), NULL)",
		// {keepExpiry} is expires_at of a kept row whose lease ends ?
		// from now: the new lease end plus the row's Keep, which is
		// expires_at - lease_until (0 for a row without Keep). It reads
		// expires_at and lease_until as they were: set expires_at with it
		// before lease_until, so that it reads the same whether the
		// server assigns left to right (MySQL, MariaDB by default) or all
		// at once (MariaDB's SIMULTANEOUS_ASSIGNMENT).
		"{keepExpiry}", "COALESCE(UTC_TIMESTAMP(6) + INTERVAL (? + COALESCE(TIMESTAMPDIFF(MICROSECOND, lease_until, expires_at), 0)) MICROSECOND, '9999-12-31 23:59:59.999999')",
		// {state} is the state a row is in: its state column, or 3
		// (abandoned) for an in-flight row whose lease_until has passed.
		"{state}", "IF(state = 1 AND lease_until <= UTC_TIMESTAMP(6), 3, state)",
	)
}

// leaseRuns holds while an in-flight row's lease runs: until lease_until
// for a kept row, until expires_at otherwise (a kept row's lease_until is
// never past its expires_at).
const leaseRuns = "COALESCE(lease_until, expires_at) > {now}"

// abandonedToken is the token of an abandoned row, NULL for any other.
const abandonedToken = "IF(state = 1 AND lease_until <= {now}, token, NULL)"

func newStatements(table string) statements {
	r := sqlReplacer(table)
	return statements{
		// read is the first step of every claim, and the only one of a
		// replay or an in-flight duplicate: a plain SELECT of the key's
		// row through the primary key, a consistent read that takes no
		// lock and writes nothing. It returns the row whatever its
		// expiry, with live telling whether it still counts, and its data
		// only when it does; its state is 3 when it is abandoned, and then
		// its token too (NULL otherwise), which a take-over fences its
		// UPDATE with; and its attempt.
		//
		// It also returns the session's isolation level: a connection at
		// READ UNCOMMITTED sees the rows of transactions that may still
		// roll back (an outcome a handler's transaction recorded with
		// CompleteTx and has not committed), so a row read there is read
		// again in a READ COMMITTED transaction (see Store.read).
		read:   r.Replace("SELECT {state}, fingerprint, IF(expires_at > {now}, data, NULL), expires_at > {now}, @@session.transaction_isolation, " + abandonedToken + ", attempt FROM {t} WHERE `key` = ?"),
		readTx: r.Replace("SELECT {state}, fingerprint, IF(expires_at > {now}, data, NULL), expires_at > {now}, @@session.tx_isolation, " + abandonedToken + ", attempt FROM {t} WHERE `key` = ?"),

		// insert claims a key that holds no row. Two claims of one key
		// cannot both insert: the primary key refuses the second with a
		// duplicate-key error (1062), after waiting for the first to
		// commit or roll back. expires_at is the end of the lease plus
		// Keep; lease_until the end of the lease with Keep, NULL without.
		insert: r.Replace("INSERT INTO {t} (`key`, state, token, fingerprint, expires_at, lease_until, attempt) VALUES (?, 1, ?, ?, {expiry}, {leaseUntil}, 1)"),

		// takeover claims a key whose row has expired. The UPDATE locks
		// the row and checks expires_at on its newest version (a locking
		// read, whatever the isolation), so two claims that take over one
		// expired row queue on its lock and only the first changes it.
		// Expiry is judged by the statement's one clock reading, the one
		// the new lease is computed from; it is taken before any wait for
		// the row lock, so it only errs towards not taking over a lease
		// that ran out during the wait.
		takeover: r.Replace("UPDATE {t} SET state = 1, token = ?, fingerprint = ?, data = NULL, expires_at = {expiry}, lease_until = {leaseUntil}, attempt = 1 " +
			"WHERE `key` = ? AND expires_at <= {now}"),

		// resume takes over an abandoned row, the one that the claim's
		// read found under the token it read: a fresh token, the next
		// attempt, a new lease and the row's Keep beyond it. Like
		// takeover it locks the row and checks it on its newest version,
		// fenced by the abandoned token, so that of the claims that read
		// the row abandoned one changes it, and a row completed, released
		// or taken over since is left alone.
		resume: r.Replace("UPDATE {t} SET token = ?, expires_at = {keepExpiry}, lease_until = {expiry}, attempt = attempt + 1 " +
			"WHERE `key` = ? AND token = ? AND state = 1 AND lease_until <= {now} AND expires_at > {now}"),

		// complete stores the outcome while the token owns the live
		// in-flight row, abandoned or not. The token that completed the row may send it
		// again (a resend after a lost reply): the row matches and is left
		// as it is, which MySQL counts as no row changed unless the
		// connection asks for found rows (CLIENT_FOUND_ROWS); completed
		// then tells the two apart. Assignments run left to right and see
		// the values before them: state is set last.
		complete: r.Replace("UPDATE {t} SET data = IF(state = 1, ?, data), expires_at = IF(state = 1, {expiry}, expires_at), state = 2 " +
			"WHERE `key` = ? AND token = ? AND expires_at > {now}"),

		// completeTx is complete inside a handler's transaction: only an
		// in-flight row, so that a second transaction of the same call
		// cannot commit side effects under an outcome already recorded.
		// It always changes the row it matches (state 1 becomes 2), so
		// its count of rows is the same with and without found rows.
		completeTx: r.Replace("UPDATE {t} SET data = ?, expires_at = {expiry}, state = 2 WHERE `key` = ? AND token = ? AND state = 1 AND expires_at > {now}"),

		// extend sets the lease of the token's in-flight row while its
		// lease runs (lease_until for a kept row, expires_at otherwise: an
		// abandoned row stays abandoned), and keeps a kept row's Keep
		// beyond it.
		extend: r.Replace("UPDATE {t} SET expires_at = {keepExpiry}, lease_until = IF(lease_until IS NULL, NULL, {expiry}) " +
			"WHERE `key` = ? AND token = ? AND state = 1 AND " + leaseRuns),

		// abandon ends the lease of the token's in-flight row now, while
		// it runs: a kept row is abandoned from now on, for its Keep; a
		// row without Keep expires now, which makes it absent to every
		// step (and the sweeper's), as a deleted row is. An abandoned row
		// is left as it is (held or not, owned tells).
		abandon: r.Replace("UPDATE {t} SET expires_at = IF(lease_until IS NULL, {now}, {now} + INTERVAL TIMESTAMPDIFF(MICROSECOND, lease_until, expires_at) MICROSECOND), " +
			"lease_until = IF(lease_until IS NULL, NULL, {now}) WHERE `key` = ? AND token = ? AND state = 1 AND " + leaseRuns),

		// release deletes the token's in-flight row, live, abandoned or
		// expired (an expired one is garbage either way).
		release: r.Replace("DELETE FROM {t} WHERE `key` = ? AND token = ? AND state = 1"),

		// completed, held, owned and live are the reads a step makes
		// after its statement changed no row: is the row the token's
		// completed one (a resent complete), the token's in-flight one
		// whose lease runs (an extension that changed nothing, the lease
		// ending where it did), the token's live in-flight one, abandoned
		// or not (an abandon of an abandoned row; a CompleteTx that did
		// not see the row), or is there any live row at all (a release of
		// nothing)?
		completed: r.Replace("SELECT 1 FROM {t} WHERE `key` = ? AND token = ? AND state = 2 AND expires_at > {now}"),
		held:      r.Replace("SELECT 1 FROM {t} WHERE `key` = ? AND token = ? AND state = 1 AND " + leaseRuns),
		owned:     r.Replace("SELECT 1 FROM {t} WHERE `key` = ? AND token = ? AND state = 1 AND expires_at > {now}"),
		live:      r.Replace("SELECT 1 FROM {t} WHERE `key` = ? AND expires_at > {now}"),

		whereAmI: "SELECT DATABASE()",

		// expired lists up to ? expired rows, oldest first, through the
		// expires_at index: a plain read, which takes no lock. sweepPrefix,
		// with as many placeholders as keys listed and a closing
		// parenthesis, deletes those of them still expired: its locking
		// read checks expires_at on each row's newest version, so a row
		// taken over meanwhile is kept. It looks the rows up by their
		// primary key (FORCE INDEX, in the multi-table syntax that takes
		// it), so that it reads and locks the listed rows and no other:
		// through the expires_at index it would lock the first live entry
		// past the expired ones, and on a small table the optimizer would
		// scan it all, and wait for any transaction holding a live row (a
		// handler's, after CompleteTx).
		expired:     r.Replace("SELECT `key` FROM {t} WHERE expires_at <= {now} ORDER BY expires_at LIMIT ?"),
		sweepPrefix: r.Replace("DELETE r FROM {t} AS r FORCE INDEX (PRIMARY) WHERE r.expires_at <= {now} AND r.`key` IN ("),
	}
}
