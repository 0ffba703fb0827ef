// Package postgresstore is a [store.Store] on PostgreSQL, built on pgx v5
// (pgxpool), that can also record a call's outcome inside the handler's own
// transaction ([Store.CompleteTx]), so that "the charge happened" and "the
// answer is recorded" commit together or not at all.
//
// # Table
//
// One row per key in one table ([DefaultTable], "idempotency_records",
// unless [WithTable] says otherwise). [Store.Migrate] creates it, and is
// safe to call on every start from many servers at once; [Schema] is the
// same DDL (the file schema.sql) for your own migration tool. Keys,
// tokens, fingerprints and data are bytea; state is 1 in flight, 2
// completed; expires_at is the end of the lease while in flight and of the
// retention once completed, or, for a claim kept beyond its lease
// ([store.ClaimOptions.Keep], kept in keep_micros), the end of the keep:
// such a row's lease ends keep_micros before expires_at, and in between
// it is abandoned. attempt counts the claims of the key that ran a handler
// and previous_token is the owner token of the abandoned attempt a
// take-over replaced. Owner tokens are made by [store.NewToken]: 25
// characters that carry the claim time (the claiming server's clock, in
// milliseconds) and 96 random bits; tokens of earlier releases, 22
// characters of random base64url, are still owned, and their claim time
// is unknown.
//
// The table is of schema version 2 (abandoned claims): Migrate upgrades a
// table of version 1 by adding keep_micros, attempt and previous_token,
// with constant defaults (no row is rewritten), and runs no DDL on a table
// that is up to date, so that it waits for no lock a call holds.
// A step on a table that was not upgraded fails with an error that says to
// migrate. Servers of an earlier release keep working on the upgraded
// table, but upgrade them all before any claim uses a keep: one of them
// taking over the expired row of a kept claim would leave its keep behind.
//
// # One statement per step
//
// Claim, Complete, Release, Extend and Abandon are each one SQL statement,
// one round trip, run as a transaction of its own under READ COMMITTED (see
// Isolation below). Claim is one statement that always returns the key's
// row. When the key holds a live completed row, its first step returns that
// row as the statement's snapshot sees it, and nothing else runs: a replay
// writes nothing, takes no row lock, is given no transaction id and commits
// without waiting for a WAL flush, so replays of one hot key run side by
// side like plain SELECTs. Otherwise its INSERT … ON CONFLICT … DO UPDATE …
// RETURNING gives a new in-flight row with the claim's token, an expired
// row taken over, or the live row as it was, with its state, fingerprint
// and data, also a row completed after the statement began. With TakeOver,
// the same statement takes over an abandoned row with the claim's
// fingerprint: a new token, one more attempt and the abandoned owner's
// token in previous_token (RETURNING sees only the new row), which Claim
// reads the previous claim time from. Concurrent claims of one key that go
// this way queue on its row lock, and each sees the row as the one before
// it left it, so exactly one wins, also when two take over the same expired
// lease at once. Complete, Release and Extend are single statements fenced
// by the token, the state and expires_at: a caller whose lease ran out can
// never overwrite or delete the next owner's row, and a release never
// removes a completed row. An abandoned row lives until its keep runs out,
// so its owner may still complete or release it (also with CompleteTx), but
// not extend it; Abandon ends a kept row's lease at once, and deletes a row
// claimed without a keep. Times come from the database's clock
// (clock_timestamp()), never from the servers' clocks. A row whose lease
// (without a keep), keep or retention has run out counts as absent to every
// step.
//
// A claim that finds a live in-flight row rewrites it unchanged (that is
// how its RETURNING sees the row, even one committed after the statement
// began): an in-flight duplicate costs a row version, a HOT update that
// the table's fillfactor leaves room for, which PostgreSQL prunes without
// a vacuum.
//
// A Claim that fails after it was sent (a connection lost before the
// reply) may have landed all the same. Claim then releases it, fenced by
// its fresh token and bounded by 500 ms, before returning the error, so
// that no claim nobody owns blocks the key for a whole lease. A claim that
// took an abandoned entry over (its row's attempt is above 1) is abandoned
// instead, fenced the same way: its handler may have run, and a release
// would forget it. A claim allowed to take over that found the key free
// made a fresh entry, and is released.
//
// # Completion inside the handler's transaction
//
// [Store.CompleteTx] records the response of the call whose claim the
// handler's context carries, inside the handler's transaction, with one
// UPDATE fenced by the claim's token; [Store.CompleteErrorTx] does the same
// for a deterministic error (a declined card written to the ledger and
// answered FAILED_PRECONDITION). The interceptor then makes no store call
// for the outcome. The protocol, and what each failure leads to, is that
// of [idempotency.TxOutcome]. While the handler's transaction is open
// after CompleteTx, it holds the row's lock: a duplicate's claim, and the
// interceptor's lease renewal, wait for it to commit (and then see the
// completed row) or roll back (and then see the claim in flight). No
// statement of the store ever raises a unique violation inside a user's
// transaction: CompleteTx is an UPDATE.
//
// A CompleteTx that changes no row usually means the claim was lost
// ([store.ErrLeaseLost]). But a transaction that cannot see the claim's
// row changes none either; the store then looks at its own table through
// its own pool (when it has a connection free, within 500 ms), and when
// the claim is still there, in
// flight, the error says what is wrong instead, and does not match
// ErrLeaseLost: the transaction runs on another database, its search_path
// finds another table of the store's table name, or it took its snapshot
// (REPEATABLE READ or SERIALIZABLE) before the call was claimed. A
// transaction that does not see the table at all gets an error saying so.
//
// # Isolation
//
// The store's steps are written for READ COMMITTED, PostgreSQL's default:
// a step that waits for a row's lock then sees the row as the transaction
// holding it left it. Under REPEATABLE READ or SERIALIZABLE the same step
// fails with a serialization error instead, which a storm of duplicates
// makes common. When the store's connections default to a stricter
// isolation (default_transaction_isolation set by ALTER DATABASE, ALTER
// ROLE, postgresql.conf or the pool's RuntimeParams), each step runs as
// BEGIN ISOLATION LEVEL READ COMMITTED, the statement and COMMIT, sent
// together in one round trip; the connections' default, and so every other
// statement on them, is left as it is. The store learns of the stricter
// default from [Store.Migrate], or from a step's first serialization
// failure, which it then runs again that way (PostgreSQL rolled the failed
// statement back).
//
// CompleteTx runs inside the handler's transaction, whose isolation the
// handler chooses. Under REPEATABLE READ or SERIALIZABLE, its UPDATE fails
// with a serialization error (SQLSTATE 40001, wrapped) when the row
// changed after the transaction's snapshot: a duplicate's claim rewrites
// an in-flight row, and a lease renewal extends it. Nothing is recorded
// then: treat it as a failed commit, roll back and return a retryable
// error (UNAVAILABLE); the interceptor releases the claim and the retry
// runs the handler again.
//
// # Sweeping
//
// A background sweeper ([WithSweepInterval], every minute by default)
// deletes expired rows in batches ([WithSweepBatch]) with FOR UPDATE SKIP
// LOCKED, so any number of servers sweep at once without waiting on each
// other or on live calls. [Store.Sweep] does one batch, for a cron job
// instead.
//
// # Inspection
//
// A Store is a [store.Inspector] and a [store.Invalidator], for an admin
// service or a command line. [Store.Lookup] is one SELECT by the primary
// key; [Store.Purge] one statement that deletes the row fenced by its state
// and token and NOTIFYs the key for [Store.Invalidations] (run again when
// another step changed the row under it); [Store.List]
// reads pages in key order from the primary key's index (keyset
// pagination: no index is added, so claims cost what they did), one index
// range scan of Limit rows per page whatever the table's size; [Store.Stats]
// is exact, one aggregate query, a sequential scan of the table. An
// entry's claim time is read from its owner token (the claiming server's
// clock; unknown for a token of an earlier release); the table keeps no
// completion time. An abandoned row is reported abandoned, with its owner
// token (an operator completes it under that token, or purges it with
// InFlight), its attempt, and Expires at the end of its keep; an in-flight
// row's Expires is the end of its lease. Stats counts abandoned rows apart.
// Invalidations LISTENs on a connection of its own, outside the pool
// ([WithListenConfig]).
//
// # PgBouncer
//
// The store works through PgBouncer in transaction pooling mode: every step
// is one statement in its own transaction, and CompleteTx runs inside the
// transaction the handler began. pgx's default query exec mode
// (QueryExecModeCacheStatement) prepares named statements per connection,
// which PgBouncer before 1.21, or without max_prepared_statements, cannot
// carry from one server connection to the next. Then set the pool's
// ConnConfig.DefaultQueryExecMode to pgx.QueryExecModeExec (one round trip
// per statement, no prepared statement) or pgx.QueryExecModeCacheDescribe.
// With PgBouncer 1.21 or later and max_prepared_statements set, the default
// mode works. LISTEN needs a session of its own, which transaction pooling
// does not keep: point [WithListenConfig] at PostgreSQL itself for
// [Store.Invalidations].
package postgresstore
