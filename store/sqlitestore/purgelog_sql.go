package sqlitestore

import "strings"

// logStatements are the SQL of the purge log of one table (see
// schema.sql), which Purge writes and Invalidations reads.
type logStatements struct {
	insert, trim, from, last string
}

func newLogStatements(log string) logStatements {
	r := strings.NewReplacer("{l}", log, "{now}", nowSQL)
	return logStatements{
		// insert logs the purge of ?1, in the purge's transaction: the
		// rowid is the largest plus one, under the write lock, so ids
		// are contiguous and committed in order.
		insert: r.Replace("INSERT INTO {l} (key, purged_at) VALUES (?1, {now}) RETURNING id"),

		// trim deletes up to ?3 rows older than ?1 milliseconds, oldest
		// first through the purged_at index, below ?2, the id the purge
		// just took: the last row is never deleted, so the next id never
		// goes back.
		trim: r.Replace("DELETE FROM {l} WHERE id IN (SELECT id FROM {l} WHERE purged_at < {now} - ?1 AND id < ?2 ORDER BY purged_at LIMIT ?3)"),

		// from reads up to ?2 rows from id ?1 on, through the primary
		// key: a subscription's poll, a read that no writer waits for.
		from: r.Replace("SELECT id, key FROM {l} WHERE id >= ?1 ORDER BY id LIMIT ?2"),

		// last is the largest id, where a subscription starts.
		last: r.Replace("SELECT COALESCE(max(id), 0) FROM {l}"),
	}
}
