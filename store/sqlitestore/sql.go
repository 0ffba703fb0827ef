package sqlitestore

import "strings"

// State values in the state column. An abandoned row is in flight (1)
// whose lease_until has passed: a state computed when read.
const (
	stateInFlight  = 1
	stateCompleted = 2
)

// statements are the store's SQL, one statement per step, for one table.
// Times are whole milliseconds since the Unix epoch, from SQLite's own
// clock ({now}), which is the clock of the process that runs the
// statement and is read once per statement: every process that shares a
// database file is on one host, so they read one clock. A write statement
// reads it once it holds the database's write lock (the clock is read as
// the statement runs, after any wait for the lock), so a step judges a
// lease by the time it changes the row, never by a time taken before a
// wait. Leases, keeps and retentions are passed in milliseconds.
type statements struct {
	// read is the first step of every claim; claim the second, for a key
	// whose read found no live row, or an abandoned one to take over.
	read, claim string

	complete, completeTx, extend, abandon, release, sweep string

	// owned and live tell a step that changed no row why (see
	// Store.Abandon, Store.Release).
	owned, live string
}

// nowSQL is the time now in milliseconds since the Unix epoch, by the
// clock SQLite reads (unixepoch('subsec') has millisecond precision, and
// is the same however often a statement reads it in one step).
const nowSQL = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)"

// sqlReplacer fills in the parts every statement shares.
func sqlReplacer(table string) *strings.Replacer {
	return strings.NewReplacer(
		"{t}", table,
		"{now}", nowSQL,
		// {abandoned} holds for an in-flight row claimed with a keep whose
		// lease has run out.
		"{abandoned}", "(state = 1 AND lease_until IS NOT NULL AND lease_until <= "+nowSQL+")",
		// {leaseRuns} holds while an in-flight row's lease runs: until
		// lease_until for a kept row, until expires_at otherwise (a kept
		// row's lease_until is never past its expires_at).
		"{leaseRuns}", "(COALESCE(lease_until, expires_at) > "+nowSQL+")",
	)
}

func newStatements(table string) statements {
	r := sqlReplacer(table)
	return statements{
		// read is a plain SELECT of the key's live row through the
		// primary key: a read transaction of its own, which takes no
		// lock that a writer waits for (WAL) and writes nothing. A
		// replay, and a duplicate of a call in flight or abandoned, is
		// answered from it: one read statement. It returns the data of a
		// completed row only.
		read: r.Replace(`SELECT state, fingerprint, CASE WHEN state = 2 THEN data END, {abandoned} FROM {t} WHERE key = ?1 AND expires_at > {now}`),

		// claim is one statement that claims the key or returns the row
		// that holds it: it inserts a new in-flight row; or, when the key
		// has a row, takes it over when it has expired, or, with ?6
		// (TakeOver), when it is abandoned with the claim's fingerprint,
		// and else rewrites it unchanged so that RETURNING gives the
		// existing row. Only one statement writes to the database at a
		// time, so of concurrent claims of one key exactly one inserts or
		// takes over; the others see its row. won tells whether the row
		// carries this claim's token.
		//
		// Every SET expression reads the row as it was (SQL's UPDATE), so
		// their order does not matter. A take-over of an abandoned row
		// keeps its fingerprint and its keep (expires_at - lease_until),
		// counts one more attempt, and records the abandoned owner's
		// token in previous_token, since RETURNING sees only the new row.
		// ?4 is the lease, ?5 the keep (0 for none), in milliseconds.
		claim: r.Replace(strings.NewReplacer(
			"{expired}", "(r.expires_at <= {now})",
			"{takeover}", "(?6 AND r.state = 1 AND r.lease_until IS NOT NULL AND r.lease_until <= {now} AND r.fingerprint = ?3)",
		).Replace(`
INSERT INTO {t} AS r (key, state, token, fingerprint, expires_at, lease_until, attempt, previous_token)
VALUES (?1, 1, ?2, ?3, {now} + ?4 + ?5, CASE WHEN ?5 > 0 THEN {now} + ?4 END, 1, NULL)
ON CONFLICT (key) DO UPDATE SET
	state          = CASE WHEN {expired} THEN 1 ELSE r.state END,
	token          = CASE WHEN {expired} OR {takeover} THEN excluded.token ELSE r.token END,
	fingerprint    = CASE WHEN {expired} THEN excluded.fingerprint ELSE r.fingerprint END,
	data           = CASE WHEN {expired} THEN NULL ELSE r.data END,
	expires_at     = CASE WHEN {expired} THEN excluded.expires_at
		WHEN {takeover} THEN {now} + ?4 + (r.expires_at - r.lease_until)
		ELSE r.expires_at END,
	lease_until    = CASE WHEN {expired} THEN excluded.lease_until WHEN {takeover} THEN {now} + ?4 ELSE r.lease_until END,
	attempt        = CASE WHEN {expired} THEN 1 WHEN {takeover} THEN r.attempt + 1 ELSE r.attempt END,
	previous_token = CASE WHEN {expired} THEN NULL WHEN {takeover} THEN r.token ELSE r.previous_token END
RETURNING token = ?2, state, fingerprint, CASE WHEN state = 2 THEN data END, {abandoned}, attempt, previous_token`)),

		// complete stores the outcome while the token owns the live
		// in-flight row, abandoned or not: an abandoned row lives until
		// its keep runs out (expires_at), and the late outcome of its
		// owner is worth keeping. The token that completed the row may
		// send it again (a resend after a lost reply): the row matches
		// and is rewritten unchanged, and SQLite counts it as changed, so
		// the step reports success.
		complete: r.Replace(`
UPDATE {t} SET
	data       = CASE WHEN state = 1 THEN ?3 ELSE data END,
	expires_at = CASE WHEN state = 1 THEN {now} + ?4 ELSE expires_at END,
	state      = 2
WHERE key = ?1 AND token = ?2 AND expires_at > {now}`),

		// completeTx is complete inside a handler's transaction: only an
		// in-flight row (abandoned or not, as for complete), so that a
		// second transaction of the same call cannot commit side effects
		// under an outcome already recorded.
		completeTx: r.Replace(`
UPDATE {t} SET data = ?3, expires_at = {now} + ?4, state = 2
WHERE key = ?1 AND token = ?2 AND state = 1 AND expires_at > {now}`),

		// extend sets the lease of the token's in-flight row while its
		// lease runs (an abandoned row stays abandoned), and keeps a kept
		// row's keep beyond it.
		extend: r.Replace(`
UPDATE {t} SET
	expires_at  = {now} + ?3 + COALESCE(expires_at - lease_until, 0),
	lease_until = CASE WHEN lease_until IS NULL THEN NULL ELSE {now} + ?3 END
WHERE key = ?1 AND token = ?2 AND state = 1 AND {leaseRuns}`),

		// abandon ends the lease of the token's in-flight row now, while
		// it runs: a kept row is abandoned from now on, for its keep; a
		// row without a keep expires now, which makes it absent to every
		// step (the sweeper deletes it), as a deleted row is. An
		// abandoned row is left as it is (owned tells the token it is
		// still its own).
		abandon: r.Replace(`
UPDATE {t} SET
	expires_at  = CASE WHEN lease_until IS NULL THEN {now} ELSE {now} + (expires_at - lease_until) END,
	lease_until = CASE WHEN lease_until IS NULL THEN NULL ELSE {now} END
WHERE key = ?1 AND token = ?2 AND state = 1 AND {leaseRuns}`),

		// release deletes the token's in-flight row, live, abandoned or
		// expired (an expired one is garbage either way).
		release: r.Replace(`DELETE FROM {t} WHERE key = ?1 AND token = ?2 AND state = 1`),

		// owned and live are the reads a step makes after its statement
		// changed no row: is the row the token's live in-flight one,
		// abandoned or not (an abandon of an abandoned row), or is there
		// any live row at all (a release of nothing)?
		owned: r.Replace(`SELECT 1 FROM {t} WHERE key = ?1 AND token = ?2 AND state = 1 AND expires_at > {now}`),
		live:  r.Replace(`SELECT 1 FROM {t} WHERE key = ?1 AND expires_at > {now}`),

		// sweep deletes up to ?1 expired rows, oldest first, through the
		// expires_at index. It runs under the write lock like every
		// write, so a row taken over meanwhile is live again and kept.
		sweep: r.Replace(`
DELETE FROM {t} WHERE key IN (
	SELECT key FROM {t} WHERE expires_at <= {now} ORDER BY expires_at LIMIT ?1
)`),
	}
}
