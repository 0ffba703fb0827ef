package postgresstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// inspectStatements are the SQL of the store.Inspector, one statement per
// step, for one table. Like the other steps they read the database's clock
// (clock_timestamp()), but for Stats, which reads statement_timestamp()
// once rather than the clock per row.
type inspectStatements struct {
	lookup, purge, listFirst, listNext, stats string
}

// sizeSQL is Info.Size of a row: its key, token, fingerprint and data.
const sizeSQL = `octet_length(key) + octet_length(token) + octet_length(fingerprint) + coalesce(octet_length(data), 0)`

// maxNotifyKey is the longest key whose hex text a NOTIFY payload (under
// 8,000 bytes) carries; a purge of a longer key notifies an empty payload,
// which Invalidations delivers as All.
const maxNotifyKey = 3999

func newInspectStatements(table pgx.Identifier) inspectStatements {
	r := strings.NewReplacer("{t}", table.Sanitize(), "{size}", sizeSQL)
	return inspectStatements{
		// lookup reads the key's live row through the primary key.
		lookup: r.Replace(`
SELECT state, token, fingerprint, data, expires_at, {size} FROM {t}
WHERE key = $1 AND expires_at > clock_timestamp()`),

		// purge deletes the key's live row when it is in state $2 and,
		// when $3 is not NULL, owned by token $3, and then notifies the
		// key, in hex, on channel $4 (NOTIFY is sent at commit). It
		// returns the row it deleted with true, or the live row it left
		// with false, or nothing. A concurrent change of the row (a
		// takeover, a completion, a purge) makes the DELETE wait for it
		// and check its conditions again on the new version, so it never
		// deletes a row that is not the one asked for. When it deleted
		// nothing, the row is read again with FOR KEY SHARE, which also
		// reads the newest committed version (a row another purge or a
		// release deleted meanwhile is gone, not refused) and waits only
		// for a DELETE under way, not for a transaction that updates the
		// row (a handler's CompleteTx).
		purge: r.Replace(`
WITH purged AS (
	DELETE FROM {t}
	WHERE key = $1 AND expires_at > clock_timestamp() AND state = $2 AND ($3::bytea IS NULL OR token = $3)
	RETURNING state, token, fingerprint, data, expires_at, {size} AS size
), notified AS (
	SELECT pg_notify($4, CASE WHEN octet_length($1) <= ` + strconv.Itoa(maxNotifyKey) + ` THEN encode($1, 'hex') ELSE '' END) FROM purged
), kept AS (
	SELECT state, token, fingerprint, data, expires_at, {size} AS size FROM {t}
	WHERE key = $1 AND expires_at > clock_timestamp()
	FOR KEY SHARE
)
SELECT true, state, token, fingerprint, data, expires_at, size, (SELECT count(*) FROM notified) FROM purged
UNION ALL
SELECT false, state, token, fingerprint, data, expires_at, size, 0 FROM kept
WHERE NOT EXISTS (SELECT 1 FROM purged)`),

		// listFirst and listNext read the next $n rows in key order from
		// the primary key's index, whatever their state or expiry (a page
		// examines that many rows), without their data.
		listFirst: r.Replace(`
SELECT key, state, token, fingerprint, expires_at, {size}, expires_at > clock_timestamp() FROM {t}
ORDER BY key LIMIT $1`),
		listNext: r.Replace(`
SELECT key, state, token, fingerprint, expires_at, {size}, expires_at > clock_timestamp() FROM {t}
WHERE key > $2 ORDER BY key LIMIT $1`),

		// stats counts the live rows and their bytes by state: a
		// sequential scan of the table.
		stats: r.Replace(`
SELECT state, count(*), coalesce(sum({size}), 0)::bigint FROM {t}
WHERE expires_at > statement_timestamp() GROUP BY state`),
	}
}

// channelOf returns the channel of the purges of table: a prefix and the
// first 64 bits of a SHA-256 of the table's name as WithTable gives it,
// quoted (a channel is an identifier of at most 63 bytes, and table names
// may be longer), so every server configured with the same name listens
// on the same channel.
func channelOf(table pgx.Identifier) string {
	sum := sha256.Sum256([]byte(table.Sanitize()))
	return "idempotency_purged_" + hex.EncodeToString(sum[:8])
}
