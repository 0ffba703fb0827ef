-- The table of github.com/grpc-idempotency/idempotency/store/sqlitestore,
-- schema version 1, for SQLite 3.35 or later (RETURNING; the store's
-- statements read the clock with unixepoch('subsec'), SQLite 3.42).
-- (*Store).Migrate runs this file, with the table name of
-- sqlitestore.WithTable; run it with your own migration tool instead if you
-- prefer. Every statement is idempotent.
--
-- One row per key. key, token, fingerprint and data are opaque bytes
-- (BLOB, compared byte by byte). state: 1 in flight (a handler holds the
-- key under token until its lease ends), 2 completed (data is the outcome,
-- kept until expires_at). Times are whole milliseconds since the Unix
-- epoch, by the clock of the process that runs the statement (SQLite's
-- unixepoch('subsec')): every process sharing the file is on one host and
-- reads one clock. A row whose expires_at has passed counts as absent: a
-- claim takes it over, every other step ignores it, and the sweeper
-- deletes it. The primary key on key is what lets exactly one claim of a
-- key through.
--
-- lease_until is NULL for a claim without a keep (store.ClaimOptions.Keep),
-- whose lease ends at expires_at. A claim with a keep has its lease end in
-- lease_until and expires_at = lease_until + Keep: from lease_until to
-- expires_at the row is abandoned (state stays 1; the store reads it as
-- abandoned, nothing is written when a lease runs out). attempt counts the
-- claims of the key that ran a handler: 1, plus one per take-over of an
-- abandoned row; previous_token is the owner token of the abandoned attempt
-- that the row's claim took over (NULL for attempt 1), which carries that
-- attempt's claim time (ClaimResult.Previous).
--
-- WITHOUT ROWID keeps each row in the primary key's b-tree: a claim or a
-- replay reads one b-tree, not an index and then the table.
--
-- The purge log, idempotency_records_purges (the table's name and
-- _purges, in its schema), holds one row per key that (*Store).Purge
-- deleted, written in the purge's transaction, which every store's
-- Invalidations polls to tell the replay caches of every process on the
-- file. id is the rowid, so each purge takes the next id under the write
-- lock: ids are contiguous, in commit order. purged_at is milliseconds
-- since the Unix epoch; a purge deletes the rows older than an hour, never
-- the last one.
CREATE TABLE IF NOT EXISTS idempotency_records (
	key            BLOB    NOT NULL PRIMARY KEY,
	state          INTEGER NOT NULL CHECK (state IN (1, 2)),
	token          BLOB    NOT NULL,
	fingerprint    BLOB    NOT NULL,
	data           BLOB,
	expires_at     INTEGER NOT NULL,
	lease_until    INTEGER,
	attempt        INTEGER NOT NULL DEFAULT 1,
	previous_token BLOB
) WITHOUT ROWID;

-- The sweeper deletes expired rows oldest first, in bounded batches.
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx
	ON idempotency_records (expires_at);

CREATE TABLE IF NOT EXISTS idempotency_records_purges (
	id        INTEGER PRIMARY KEY,
	key       BLOB    NOT NULL,
	purged_at INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS idempotency_records_purges_purged_at_idx
	ON idempotency_records_purges (purged_at);
