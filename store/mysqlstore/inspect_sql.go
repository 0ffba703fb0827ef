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

// expiresSQL is a row's expires_at in microseconds since the Unix epoch.
const expiresSQL = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at)"

func newInspectStatements(table string) inspectStatements {
	r := sqlReplacer(table)
	return inspectStatements{
		// lookup reads the key's live row through the primary key.
		lookup: r.Replace("SELECT state, token, fingerprint, data, " + expiresSQL + ", " + sizeSQL + " FROM {t} WHERE `key` = ? AND expires_at > {now}"),

		// purge deletes the key's live row in the state and with the
		// token it had when Purge read it: the entry Purge read and no
		// other (a row claimed again since has another token; a completed
		// row never changes; an in-flight row completed since has another
		// state).
		purge: r.Replace("DELETE FROM {t} WHERE `key` = ? AND token = ? AND state = ? AND expires_at > {now}"),

		// listFirst and listNext read the next ? rows in key order from the
		// primary key, whatever their state or expiry (a page examines
		// that many rows), without their data.
		listFirst: r.Replace("SELECT `key`, state, token, fingerprint, " + expiresSQL + ", " + sizeSQL + ", expires_at > {now} FROM {t} " +
			"ORDER BY `key` LIMIT ?"),
		listNext: r.Replace("SELECT `key`, state, token, fingerprint, " + expiresSQL + ", " + sizeSQL + ", expires_at > {now} FROM {t} " +
			"WHERE `key` > ? ORDER BY `key` LIMIT ?"),

		// stats counts the live rows and their bytes by state: a scan of
		// the table.
		stats: r.Replace("SELECT state, COUNT(*), CAST(COALESCE(SUM(" + sizeSQL + "), 0) AS SIGNED) FROM {t} WHERE expires_at > {now} GROUP BY state"),
	}
}
