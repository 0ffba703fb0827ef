package mysqlstore

import "context"

// StatementNames returns the SQL of each statement of s by its name, for
// tests that check which statements a step sends.
func StatementNames(s *Store) map[string]string {
	return map[string]string{
		"read": readOf(s), "insert": s.sql.insert, "takeover": s.sql.takeover, "resume": s.sql.resume,
		"complete": s.sql.complete, "completeTx": s.sql.completeTx, "extend": s.sql.extend,
		"abandon": s.sql.abandon, "release": s.sql.release, "completed": s.sql.completed, "held": s.sql.held,
		"owned": s.sql.owned, "live": s.sql.live,
		"expired": s.sql.expired,
		"lookup":  s.isql.lookup, "purge": s.isql.purge, "listFirst": s.isql.listFirst,
		"listNext": s.isql.listNext, "stats": s.isql.stats,
		"logHead": s.lsql.head, "logNext": s.lsql.next, "logInsert": s.lsql.insert, "logTrim": s.lsql.trim,
		"logFrom": s.lsql.from, "logFromTx": s.lsql.fromTx, "logLast": s.lsql.last,
	}
}

// readOf returns the claim's read statement s uses on its server, once
// known.
func readOf(s *Store) string {
	if s.isolationVar.Load() == isolationTx {
		return s.sql.readTx
	}
	return s.sql.read
}

// PollLog is one poll of a subscription of s, from id on: the rows of the
// purge log it reads.
func PollLog(ctx context.Context, s *Store, id int64) (int, error) {
	rows, err := s.logFrom(ctx, id, 257)
	return len(rows), err
}
