package postgresstore

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// inspectStatements are the SQL of the store.Inspector, one statement per
// step, for one table. Like the other steps they read the database's clock
// (clock_timestamp()), but for Stats, which reads statement_timestamp()
// once rather than the clock per row.
type inspectStatements struct {
	lookup, purge, listFirst, listNext, stats string
}

// abandonedSQL is true for an in-flight row claimed with a keep whose
// lease ran out by the clock {now}; expiresSQL is Info.Expires of a row:
// the end of its lease while its lease runs, else expires_at (the end of
// its keep or of its retention).
const (
	abandonedSQL = `(state = 1 AND keep_micros > 0 AND {lease_end} <= {now})`
	expiresSQL   = `CASE WHEN state = 1 AND {lease_end} > {now} THEN {lease_end} ELSE expires_at END`
)

// sizeSQL is Info.Size of a row: its key, token, fingerprint and data.
const sizeSQL = `octet_length(key) + octet_length(token) + octet_length(fingerprint) + coalesce(octet_length(data), 0)`

// maxNotifyKey is the longest key whose hex text a NOTIFY payload (under
// 8,000 bytes) carries; a purge of a longer key notifies an empty payload,
// which Invalidations delivers as All.
const maxNotifyKey = 3999

func newInspectStatements(table pgx.Identifier) inspectStatements {
	r := strings.NewReplacer("{t}", table.Sanitize(), "{size}", sizeSQL,
		"{abandoned}", abandonedSQL, "{expires}", expiresSQL)
	// The second pass fills the parts of the first.
	clock := strings.NewReplacer("{lease_end}", leaseEnd(""), "{now}", "clock_timestamp()")
	stmt := func(sql string) string { return clock.Replace(r.Replace(sql)) }
	return inspectStatements{
		// lookup reads the key's live row through the primary key.
		lookup: stmt(`
SELECT state, token, fingerprint, data, {expires}, {size}, {abandoned}, attempt FROM {t}
WHERE key = $1 AND expires_at > clock_timestamp()`),

		// purge deletes the key's live row when it is in state $2 and,
		// when $3 is not NULL, owned by token $3, and then notifies the
		// key, in hex, on the channel of the table $4 names (NOTIFY is
		// sent at commit; see channelSQL). It
		// returns the row it deleted with true, or the live row it left
		// with false, or nothing. A concurrent change of the row (a
		// takeover, a completion, a purge) makes the DELETE wait for it
		// and check its conditions again on the new version, so it never
		// deletes a row that is not the one asked for. When it deleted
		// nothing, the row is read again with FOR KEY SHARE, which waits
		// only for a DELETE under way, not for a transaction that updates
		// the row (a handler's CompleteTx). A row deleted since the
		// statement's snapshot is gone, not refused; but a row updated
		// since (every step but a delete leaves the key as it is) is
		// returned as the snapshot holds it: FOR KEY SHARE neither waits
		// for such an update nor moves to its new version. So when the
		// DELETE waited for a completion or a take-over and then found
		// the new version no longer matched, kept returns the old version,
		// one that matches: Store.Purge then runs the statement again
		// (decision 319).
		purge: stmt(`
WITH purged AS (
	DELETE FROM {t}
	WHERE key = $1 AND expires_at > clock_timestamp() AND state = $2 AND ($3::bytea IS NULL OR token = $3)
	RETURNING state, token, fingerprint, data, {expires} AS expires, {size} AS size, {abandoned} AS abandoned, attempt
), notified AS (
	SELECT pg_notify(` + channelSQL("$4") + `, CASE WHEN octet_length($1) <= ` + strconv.Itoa(maxNotifyKey) + ` THEN encode($1, 'hex') ELSE '' END) FROM purged
), kept AS (
	SELECT state, token, fingerprint, data, {expires} AS expires, {size} AS size, {abandoned} AS abandoned, attempt FROM {t}
	WHERE key = $1 AND expires_at > clock_timestamp()
	FOR KEY SHARE
)
SELECT true, state, token, fingerprint, data, expires, size, abandoned, attempt, (SELECT count(*) FROM notified) FROM purged
UNION ALL
SELECT false, state, token, fingerprint, data, expires, size, abandoned, attempt, 0 FROM kept
WHERE NOT EXISTS (SELECT 1 FROM purged)`),

		// listFirst and listNext read the next $n rows in key order from
		// the primary key's index, whatever their state or expiry (a page
		// examines that many rows), without their data.
		listFirst: stmt(`
SELECT key, state, token, fingerprint, {expires}, {size}, expires_at > clock_timestamp(), {abandoned}, attempt FROM {t}
ORDER BY key LIMIT $1`),
		listNext: stmt(`
SELECT key, state, token, fingerprint, {expires}, {size}, expires_at > clock_timestamp(), {abandoned}, attempt FROM {t}
WHERE key > $2 ORDER BY key LIMIT $1`),

		// stats counts the live rows and their bytes by state, abandoned
		// rows apart (sqlcore.StateAbandoned): a sequential scan of the
		// table.
		stats: strings.NewReplacer("{lease_end}", leaseEnd(""), "{now}", "statement_timestamp()").Replace(r.Replace(`
SELECT CASE WHEN {abandoned} THEN ` + strconv.Itoa(sqlcore.StateAbandoned) + ` ELSE state END, count(*), coalesce(sum({size}), 0)::bigint FROM {t}
WHERE expires_at > statement_timestamp() GROUP BY 1`)),
	}
}

// channelSQL returns the SQL of the channel of the purges of the table
// that the parameter param names, as the store quotes it (Store.table):
// a prefix and the first 64 bits, in hex, of a SHA-256 of the table's
// schema-qualified name as the catalog holds it, each part quoted as
// pgx.Identifier quotes it (the channel of earlier releases for a table
// that WithTable named "schema.name", so servers of both agree on it
// during an upgrade). The name is resolved
// through the session's search_path, as the store's statements resolve it,
// so every store on one table notifies and listens on one channel however
// WithTable spells it ("t" found through the search_path, or "public.t"),
// and stores on two tables of one name in two schemas on two. A channel is
// an identifier of at most 63 bytes, and a table's qualified name may be
// longer: hence the hash. A table that does not exist is an error.
func channelSQL(param string) string {
	return `(SELECT 'idempotency_purged_' || left(encode(sha256(convert_to(
		'"' || replace(n.nspname, '"', '""') || '"."' || replace(c.relname, '"', '""') || '"', 'UTF8')), 'hex'), 16)
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ` + param + `::text::regclass)`
}
