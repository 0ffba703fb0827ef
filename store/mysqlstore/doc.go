// Package mysqlstore is a [store.Store] on MySQL or MariaDB, built on
// database/sql and github.com/go-sql-driver/mysql, that can also record a
// call's outcome inside the handler's own transaction ([Store.CompleteTx]),
// so that "the charge happened" and "the answer is recorded" commit
// together or not at all.
//
// # Table
//
// One row per key in one InnoDB table ([DefaultTable],
// "idempotency_records", unless [WithTable] says otherwise). [Store.Migrate]
// creates it, and is safe to call on every start from many servers at
// once; [Schema] is the same DDL (the file schema.sql) for your own
// migration tool. Keys, tokens, fingerprints and data are VARBINARY and
// LONGBLOB, compared byte by byte, never through a collation; a key or a
// fingerprint over 255 bytes is an argument error (the interceptor's are
// 43 and 33). state is 1 in flight, 2 completed; expires_at, a DATETIME(6)
// in UTC, is the end of the lease while in flight and of the retention once
// completed (and the end of a kept claim's Keep: see Abandoned claims).
// Times come from the database's clock, UTC_TIMESTAMP(6) (so the
// sessions' time_zone does not matter), never from the servers' clocks. A
// row whose expires_at has passed counts as absent to every step. A
// table made by a release before abandoned claims (schema version 1)
// lacks the columns lease_until and attempt: Migrate adds them
// ([Upgrade], the file upgrade.sql, for your own tool), once, before any
// server claims with Keep. Schema version 3 adds the purge log (see
// Purges and the replay caches), which Migrate creates ([PurgeLog], the
// file purgelog.sql, for your own tool).
// Owner tokens are made by [store.NewToken]: 25 characters that carry the
// claim time (the claiming server's clock, in milliseconds) and 96 random
// bits.
//
// # The claim, and why it costs what it costs
//
// A replay, and a duplicate of a call in flight, must cost a read: no row
// lock, so that replays of one hot key do not queue on each other or on a
// handler's open transaction, and no write. So a claim begins with a plain
// SELECT of the key's row through the primary key, a consistent read that
// takes no lock (in autocommit, also under SERIALIZABLE). A live row,
// completed or in flight, is returned as read, and that is the whole
// claim: one round trip. Returning it from the read is safe: nothing
// changes a live completed row but a resend of its own completion, which
// leaves it as it is; an in-flight row may complete or be released just
// after, which a retry sees.
//
// Only a key with no live row is written, and then the write decides, not
// the read: an INSERT when the key has no row, whose primary key lets
// exactly one of many concurrent claims through (the others wait for the
// winner's commit and get a duplicate-key error); an UPDATE … WHERE
// expires_at <= now when the row has expired, whose row lock and check
// on the row's newest version let exactly one takeover through. Either
// writes the claim's fresh token; a claim that loses that race (a
// duplicate-key error, or a takeover that changed no row) reads the key
// again and returns what it finds. A new key therefore costs two round
// trips (the SELECT that finds nothing, the INSERT), a takeover two, and
// a lost race one more read; an executed call three in all with Complete
// (two, and the UPDATE inside the handler's transaction, with
// CompleteTx), one more than on PostgreSQL.
//
// Fewer is not possible without giving up something the store needs.
// MySQL has no RETURNING on INSERT … ON DUPLICATE KEY UPDATE and no
// writable CTE, so no one statement both writes and returns a row; a
// statement that writes first (an upsert, or an INSERT that meets the
// duplicate key) locks the existing row, so a replay would no longer be a
// read; and the upsert's count of affected rows (1 inserted, 2 updated, 0
// unchanged) says 1 for an unchanged row when the DSN sets
// clientFoundRows, so it cannot tell a won claim from a lost one on every
// connection. Two statements in one round trip need either a stored
// procedure, which TiDB does not run, Vitess runs only on an unsharded
// keyspace, and a migration tool must version as code, or multiStatements
// on the DSN, which lets any injected SQL on the pool stack statements and
// which the store cannot ask of a pool it does not own. The store
// therefore spends its round trips where they are cheapest: replays and
// duplicates, the calls a retry storm is made of, cost one read each;
// only a call that runs the handler pays for writes, and those commit
// anyway.
//
// Because the write decides, a claim stays exactly once even when its read
// is stale (a SELECT that a proxy sends to a lagging replica): a row the
// read missed refuses the INSERT, and a row it saw expired but that is
// live refuses the takeover.
//
// Complete, Release, Extend and Abandon are single statements fenced by
// the token, the state and expires_at (and lease_until, for Extend and
// Abandon): a caller whose lease ran out can never
// overwrite or delete the next owner's row, and a release never removes a
// completed row. MySQL counts the rows an UPDATE changed, not those it
// matched (unless the DSN sets clientFoundRows), so a Complete resent by
// the token that completed the row, which changes nothing, is told from a
// lost lease by one more SELECT, as is an Extend that changed nothing and
// a Release of a key that holds no live row; those are rare, and the
// usual step is one round trip. Each statement is prepared once per
// connection (database/sql's Stmt), so a step is one COM_STMT_EXECUTE
// whatever the DSN's interpolateParams. A statement that InnoDB chose as a
// deadlock's victim (which it rolled back) runs again.
//
// A claim whose INSERT or UPDATE fails after it was sent (a connection
// lost before the reply) may have landed all the same. Claim then releases
// it, fenced by its fresh token and bounded by 500 ms, before returning
// the error, so that no claim nobody owns blocks the key for a whole
// lease.
//
// # Abandoned claims
//
// A claim with [store.ClaimOptions.Keep] writes the end of its lease in
// lease_until and the end of its Keep in expires_at, from the same clock
// reading, so that the row's Keep is expires_at - lease_until: the row
// needs no column of its own for it, and the sweeper, which reads
// expires_at, keeps the row until its Keep has run out. A claim without
// Keep leaves lease_until NULL, and its lease ends at expires_at, as
// before. A row in flight whose lease_until has passed is abandoned:
// nothing is written when its server dies, every statement that reads the
// row compares lease_until with the database's clock (the claim's read
// returns such a row's state as 3, and its token). attempt counts the
// claims that ran a handler.
//
// The read costs nothing more: a claim of a free key is still the SELECT
// and the INSERT, a replay and a duplicate the SELECT alone, and an
// abandoned row is found by the same SELECT. A take-over
// ([store.ClaimOptions.TakeOver]) that reads an abandoned row with its
// own fingerprint writes it with one UPDATE fenced by the abandoned token
// that the SELECT returned, lease_until and expires_at checked again on
// the row's newest version: a fresh token, attempt + 1, a new lease and
// the same Keep beyond it; of many take-overs, one changes the row and
// the others read it again, in flight. Its Previous is read from the
// abandoned token ([store.TokenTime]), the claiming server's clock. A
// take-over whose UPDATE may have landed though it failed is abandoned,
// not released, so that the entry stays abandoned.
//
// Extend is fenced by lease_until too (an abandoned row stays abandoned)
// and moves both ends, keeping the Keep; Complete, CompleteTx and Release
// accept the token of an abandoned row that nobody took over. Abandon is
// one UPDATE: a kept row's lease ends now and its Keep runs from now; a
// row without Keep expires now, which makes it absent as a deleted row
// is, and the sweeper deletes it; an abandoned row is left as it is (one
// SELECT more tells that from a lost lease).
//
// During an upgrade from schema version 1, a server of the earlier
// release that takes over an expired kept row does not reset lease_until,
// and the row would read as abandoned while its new handler runs: claim
// with Keep only once every server runs this release.
//
// # Completion inside the handler's transaction
//
// [Store.CompleteTx] records the response of the call whose claim the
// handler's context carries, inside the handler's *sql.Tx, with one
// UPDATE fenced by the claim's token; [Store.CompleteErrorTx] does the
// same for a deterministic error (a declined card written to the ledger
// and answered FAILED_PRECONDITION). The interceptor then makes no store
// call for the outcome. The protocol, and what each failure leads to, is
// that of [idempotency.TxOutcome]. The UPDATE is a locking read, so it
// sees the claim whatever the transaction's isolation and snapshot; from
// it to the end of the transaction, the transaction holds the row's lock,
// and the interceptor's lease renewal waits for it to commit (and then
// finds the row completed) or roll back (and then renews the claim). A
// duplicate of the call does not wait: its claim is a plain read, which
// sees the claim in flight until the commit. No statement of the store
// raises a duplicate-key error inside a user's transaction: CompleteTx is
// an UPDATE.
//
// A CompleteTx that changes no row usually means the claim was lost
// ([store.ErrLeaseLost]). But a transaction on another database that holds
// a table of the same name changes none either; the store then looks at
// its own table through its own pool (when it has an idle connection,
// within 500 ms), and when the claim is still there, in flight, the error
// says what is wrong instead, and does not match ErrLeaseLost. A
// transaction that does not see the table at all gets an error saying so.
// InnoDB may choose the handler's transaction as a deadlock's victim and
// roll it back; CompleteTx then returns that error, and, as after any
// failed commit, the handler returns a retryable error.
//
// # Sessions
//
// The pool's connections must run in autocommit mode, the server's
// default: each step is a transaction of its own. [Store.Migrate] checks
// it. Any transaction isolation works (a plain read in autocommit is a
// fresh consistent read under every level, and the writes are locking
// reads of the newest version), and so do clientFoundRows,
// interpolateParams and parseTime. At READ UNCOMMITTED a plain read sees
// uncommitted rows, such as an outcome a handler's transaction recorded
// with CompleteTx before its commit: the claim's read returns the
// session's isolation with the row, and reads a row found at that level
// again in a read-only READ COMMITTED transaction, so that a duplicate is
// never replayed an answer that may roll back (a replay then costs five
// statements instead of one). Outcomes travel in one packet:
// max_allowed_packet must exceed the largest outcome (the interceptor's
// WithMaxResponseBytes, 4 MiB by default; MariaDB's default packet is 16
// MiB, MySQL's 64 MiB). [Store.Migrate] reads it, and
// [Store.MaxRecordBytes] reports it to idempotency.NewServer, which
// refuses at start-up a WithMaxResponseBytes that does not fit: run
// Migrate before NewServer.
//
// # Sweeping
//
// A background sweeper ([WithSweepInterval], every minute by default)
// deletes expired rows in batches ([WithSweepBatch]), oldest first: a
// plain SELECT lists a batch through the expires_at index, and one DELETE
// through the primary key removes the rows listed that are still expired,
// in a READ COMMITTED transaction. It locks no row but those, so it never
// waits for a handler's transaction holding a live row, and any number of
// servers sweep at once. [Store.Sweep] does one batch, for a cron job
// instead.
//
// # Inspection
//
// A Store is a [store.Inspector], for an admin service or a command line.
// [Store.Lookup] is one SELECT by the primary key; [Store.Purge] reads the
// key's row and deletes that very entry, fenced by its token and state
// (a SELECT, then the DELETE and the purge log's writes in one
// transaction, atomic by the fence; a DELETE that finds the entry changed
// deletes nothing and the key is read again); [Store.List] reads
// pages in key order from the primary key (keyset pagination: no index is
// added, so claims cost what they did); [Store.Stats] is exact, one
// aggregate query, a scan of the table. An entry's claim time is read from
// its owner token; the table keeps no completion time. An abandoned entry
// is listed, counted and purged (with [store.PurgeOptions.InFlight]) as
// such; its Info.Token is its owner token, under which [Store.Complete]
// resolves it.
//
// # Purges and the replay caches
//
// A Store is a [store.Invalidator]. MySQL has no LISTEN/NOTIFY, so purges
// go through a purge log, a table beside the records table (its name and
// _purges; [PurgeLog] is its DDL, which [Store.Migrate] runs): Purge
// writes one row per key it deletes, in the transaction of its DELETE, and
// each subscription ([Store.Invalidations], one per server with a replay
// cache) polls the rows after the last it read, every second
// ([WithInvalidationInterval]), with one SELECT through the log's primary
// key that takes no lock. A purge by any server on the table reaches
// every server's replay cache within one interval and one round trip after
// its commit. Purges lock the log's head row, from their DELETE to their
// commit, and take the next id under it, so ids are committed in order
// and a poll never skips a purge that committed late. A purge deletes the
// log's rows older than an hour; a subscription that could not read the
// log for longer (the database unreachable) delivers All (drop everything)
// once it reads again, and one that could not for less loses nothing. A
// purge on a table without its log (an earlier release's, before Migrate)
// fails and deletes nothing.
//
// # Vitess, PlanetScale and TiDB
//
// The store uses nothing but InnoDB's primary key, row locks, autocommit
// statements and, for a purge, one transaction over the records table and
// its purge log, which these speak. What they need from a
// deployment is stated in the repository's docs/stores.md; the store's
// tests run on MariaDB.
package mysqlstore
