package mysqlstore

import "strings"

// logStatements are the SQL of the purge log of one table (see
// purgelog.sql), which Purge writes and Invalidations reads.
type logStatements struct {
	head, next, insert, trim string

	// from reads the log with the session's isolation level, read from
	// transaction_isolation; fromTx from tx_isolation (see readSQL).
	from, fromTx, last string
}

func newLogStatements(log string) logStatements {
	r := strings.NewReplacer("{l}", log, "{now}", "UTC_TIMESTAMP(6)")
	from := "SELECT id, `key`, @@session.%s FROM {l} WHERE id >= ? ORDER BY id LIMIT ?"
	return logStatements{
		// head locks the log's head, row 0, writing it the first time:
		// a purge holds it from there to its commit, so purges take their
		// ids one after the other, each after the last one's commit.
		head: r.Replace("INSERT INTO {l} (id, `key`, purged_at) VALUES (0, NULL, {now}) ON DUPLICATE KEY UPDATE purged_at = {now}"),

		// next reads the largest id, a locking read of the newest
		// committed version (row 0, the head, at least).
		next: r.Replace("SELECT id FROM {l} ORDER BY id DESC LIMIT 1 FOR UPDATE"),

		// insert logs the purge of a key under the id next read plus one.
		insert: r.Replace("INSERT INTO {l} (id, `key`, purged_at) VALUES (?, ?, {now})"),

		// trim deletes up to ? rows older than ? microseconds below the id
		// the purge just took, oldest first through purged_at_idx: the
		// last row, whose id the next purge counts from, is never deleted.
		trim: r.Replace("DELETE FROM {l} WHERE purged_at < {now} - INTERVAL ? MICROSECOND AND id > 0 AND id < ? ORDER BY purged_at LIMIT ?"),

		// from reads up to ? rows from id ? on through the primary key, a
		// consistent read in autocommit that takes no lock: a
		// subscription's poll. It returns the session's isolation level:
		// rows read at READ UNCOMMITTED are read again in a READ COMMITTED
		// transaction, since an uncommitted row may roll back and its id
		// be taken by another purge.
		from:   r.Replace(strings.Replace(from, "%s", "transaction_isolation", 1)),
		fromTx: r.Replace(strings.Replace(from, "%s", "tx_isolation", 1)),

		// last is the largest id, where a subscription starts.
		last: r.Replace("SELECT COALESCE(MAX(id), 0) FROM {l}"),
	}
}
