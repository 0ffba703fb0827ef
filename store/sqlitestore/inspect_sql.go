package sqlitestore

import (
	"strconv"

	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// inspectStatements are the SQL of the store.Inspector, for one table.
// Like the other steps they read SQLite's clock once per statement.
type inspectStatements struct {
	lookup, purge, listFirst, listNext, stats string
}

// sizeSQL is Info.Size of a row: its key, token, fingerprint and data
// (length() of a BLOB is its bytes).
const sizeSQL = "length(key) + length(token) + length(fingerprint) + COALESCE(length(data), 0)"

// expiresSQL is Info.Expires of a row, in milliseconds since the Unix
// epoch: the end of its lease while in flight (lease_until, when the row
// keeps its entry beyond it), and expires_at otherwise (the end of an
// abandoned row's keep, or of a completed row's retention).
const expiresSQL = "CASE WHEN state = 1 AND lease_until > {now} THEN lease_until ELSE expires_at END"

func newInspectStatements(table string) inspectStatements {
	r := sqlReplacer(table)
	cols := "state, token, fingerprint, " + expiresSQL + ", " + sizeSQL + ", {abandoned}, attempt"
	return inspectStatements{
		// lookup reads the key's live row through the primary key.
		lookup: r.Replace("SELECT " + cols + ", data FROM {t} WHERE key = ?1 AND expires_at > {now}"),

		// purge deletes the key's live row in the state, with the token
		// and abandoned or not as it was when Purge read it: the entry
		// Purge read and no other (a row claimed again since has another
		// token; a completed row never changes; an in-flight row completed
		// since has another state, one abandoned since is abandoned), so
		// that what Purge reports is what it deleted. An abandoned row's
		// state is 1 here.
		purge: r.Replace("DELETE FROM {t} WHERE key = ?1 AND token = ?2 AND state = ?3 AND {abandoned} = ?4 AND expires_at > {now}"),

		// listFirst and listNext read the next ? rows in key order from the
		// primary key, whatever their state or expiry (a page examines
		// that many rows), without their data.
		listFirst: r.Replace("SELECT key, " + cols + ", expires_at > {now} FROM {t} ORDER BY key LIMIT ?1"),
		listNext:  r.Replace("SELECT key, " + cols + ", expires_at > {now} FROM {t} WHERE key > ?2 ORDER BY key LIMIT ?1"),

		// stats counts the live rows and their bytes by state, abandoned
		// rows apart (sqlcore.StateAbandoned): a scan of the table.
		stats: r.Replace("SELECT CASE WHEN {abandoned} THEN " + strconv.Itoa(sqlcore.StateAbandoned) + " ELSE state END AS s, count(*), COALESCE(sum(" + sizeSQL + "), 0) FROM {t} WHERE expires_at > {now} GROUP BY s"),
	}
}

// The prefix of List's cursors: "s1:", then the hex of the last key read.
var listCursor = sqlcore.Cursor{Pkg: "sqlitestore", Prefix: "s1:"}
