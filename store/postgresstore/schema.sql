-- The table of github.com/grpc-idempotency/idempotency/store/postgresstore,
-- schema version 1. (*Store).Migrate runs this file, with the table name
-- of postgresstore.WithTable; run it with your own migration tool instead
-- if you prefer. Every statement is idempotent.
--
-- One row per key. key, token, fingerprint and data are opaque bytes.
-- state: 1 in flight (a handler holds the key under token until expires_at),
-- 2 completed (data is the outcome, kept until expires_at). A row whose
-- expires_at has passed counts as absent: a claim takes it over, every
-- other step ignores it, and the sweeper deletes it.
CREATE TABLE IF NOT EXISTS idempotency_records (
	key         bytea       NOT NULL PRIMARY KEY,
	state       smallint    NOT NULL CHECK (state IN (1, 2)),
	token       bytea       NOT NULL,
	fingerprint bytea       NOT NULL,
	data        bytea,
	expires_at  timestamptz NOT NULL
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
