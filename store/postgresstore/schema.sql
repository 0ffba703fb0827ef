-- The table of github.com/grpc-idempotency/idempotency/store/postgresstore,
-- schema version 2. (*Store).Migrate runs this file, with the table name
-- of postgresstore.WithTable; run it with your own migration tool instead
-- if you prefer. Every statement is idempotent.
--
-- One row per key. key, token, fingerprint and data are opaque bytes.
-- state: 1 in flight (a handler holds the key under token until expires_at),
-- 2 completed (data is the outcome, kept until expires_at). A row whose
-- expires_at has passed counts as absent: a claim takes it over, every
-- other step ignores it, and the sweeper deletes it.
--
-- Version 2 adds keep_micros, attempt and previous_token (abandoned
-- claims). An in-flight row claimed with a keep (store.ClaimOptions.Keep)
-- has keep_micros > 0 and lives keep_micros beyond its lease: its lease
-- ends at expires_at - keep_micros microseconds, and from then until
-- expires_at it is abandoned (computed when read; nothing is written when
-- a lease runs out). keep_micros is 0 for a row claimed without a keep,
-- whose lease ends at expires_at as in version 1. attempt counts the
-- claims of the key that ran a handler (1, plus 1 per take-over of an
-- abandoned row); previous_token is the owner token of the abandoned
-- attempt that the row's claim took over, NULL for attempt 1.
CREATE TABLE IF NOT EXISTS idempotency_records (
	key         bytea       NOT NULL PRIMARY KEY,
	state       smallint    NOT NULL CHECK (state IN (1, 2)),
	token       bytea       NOT NULL,
	fingerprint bytea       NOT NULL,
	data        bytea,
	expires_at  timestamptz NOT NULL,
	keep_micros bigint      NOT NULL DEFAULT 0,
	attempt     integer     NOT NULL DEFAULT 1,
	previous_token bytea
) WITH (
	-- Room on each page for the new version of a row, so that the claim
	-- of an in-flight duplicate (which rewrites the row unchanged) is a
	-- HOT update.
	fillfactor = 80,
	-- Vacuum after 1% of the rows changed, not the default 20%: rows here
	-- are short-lived and rewritten often.
	autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_vacuum_insert_scale_factor = 0.01,
	autovacuum_analyze_scale_factor = 0.02
);

-- The sweeper deletes expired rows oldest first, in bounded batches.
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx
	ON idempotency_records (expires_at);

-- A table of version 1 gains the columns of version 2. ALTER TABLE takes
-- an ACCESS EXCLUSIVE lock even when the columns exist, which would queue
-- every call behind the longest transaction on the table at each start;
-- so the block alters the table only when reading the columns fails. The
-- defaults are constants: adding the columns rewrites no row.
DO $migrate$
BEGIN
	PERFORM keep_micros, attempt, previous_token FROM idempotency_records LIMIT 0;
EXCEPTION WHEN undefined_column THEN
	ALTER TABLE idempotency_records
		ADD COLUMN IF NOT EXISTS keep_micros bigint NOT NULL DEFAULT 0,
		ADD COLUMN IF NOT EXISTS attempt integer NOT NULL DEFAULT 1,
		ADD COLUMN IF NOT EXISTS previous_token bytea;
END
$migrate$;
