package mysqlstore

// inspectStatements are the SQL of the store.Inspector, for one table.
// Like the other steps they read the database's clock (UTC_TIMESTAMP(6)),
// once per statement. Expiries are read as microseconds since the Unix
// epoch, so that no DSN setting (parseTime, loc) changes how they read.
type inspectStatements struct {
	lookup, purge, listFirst, listNext, stats string
}

// sizeSQL is Info.Size of a row: its key, token, fingerprint and data.
const sizeSQL = "LENGTH(`key`) + LENGTH(token) + LENGTH(fingerprint) + COALESCE(LENGTH(data), 0)"

// expiresSQL is Info.Expires of a row, in microseconds since the Unix
// epoch: the end of its lease while in flight (lease_until, when the row
// keeps its entry beyond it), and expires_at otherwise (the end of an
// abandoned row's Keep, or of a completed row's retention).
const expiresSQL = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', IF(state = 1 AND lease_until > {now}, lease_until, expires_at))"

func newInspectStatements(table string) inspectStatements {
	r := sqlReplacer(table)
	return inspectStatements{
		// lookup reads the key's live row through the primary key. Like
		// every inspection statement, it reads an abandoned row's state as
		// 3.
		lookup: r.Replace("SELECT {state}, token, fingerprint, data, " + expiresSQL + ", " + sizeSQL + ", attempt FROM {t} WHERE `key` = ? AND expires_at > {now}"),

		// purge deletes the key's live row in the state and with the
		// token it had when Purge read it: the entry Purge read and no
		// other (a row claimed again since has another token; a completed
		// row never changes; an in-flight row completed since has another
		// state). An abandoned row's state is 1 here.
		purge: r.Replace("DELETE FROM {t} WHERE `key` = ? AND token = ? AND state = ? AND expires_at > {now}"),

		// listFirst and listNext read the next ? rows in key order from the
		// primary key, whatever their state or expiry (a page examines
		// that many rows), without their data.
		listFirst: r.Replace("SELECT `key`, {state}, token, fingerprint, " + expiresSQL + ", " + sizeSQL + ", expires_at > {now}, attempt FROM {t} " +
			"ORDER BY `key` LIMIT ?"),
		listNext: r.Replace("SELECT `key`, {state}, token, fingerprint, " + expiresSQL + ", " + sizeSQL + ", expires_at > {now}, attempt FROM {t} " +
			"WHERE `key` > ? ORDER BY `key` LIMIT ?"),

		// stats counts the live rows and their bytes by state: a scan of
		// the table.
		stats: r.Replace("SELECT {state} AS s, COUNT(*), CAST(COALESCE(SUM(" + sizeSQL + "), 0) AS SIGNED) FROM {t} WHERE expires_at > {now} GROUP BY s"),
	}
}
