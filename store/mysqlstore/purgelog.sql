-- The purge log of github.com/grpc-idempotency/idempotency/store/mysqlstore,
-- part of schema version 3: the table's name and _purges (or
-- idempotency_purges_ and 16 hex digits of a SHA-256 of the table's name,
-- when that is longer than 64 bytes), in the table's database.
-- (*Store).Migrate runs this file beside schema.sql, and adds it to a
-- table made by an earlier release; run it with your own migration tool
-- instead if you prefer. The statement is idempotent.
--
-- One row per key that (*Store).Purge deleted, written in the purge's
-- transaction, which every store's Invalidations polls to tell the replay
-- caches of every server on the table. Row 0, written by the first purge,
-- is the log's head: each purge locks it (an upsert), then takes the
-- largest id plus one, and holds the lock until its commit, so ids are
-- contiguous and committed in order. purged_at is UTC, from
-- UTC_TIMESTAMP(6); a purge deletes the rows older than an hour, through
-- purged_at_idx, never the last one.
CREATE TABLE IF NOT EXISTS idempotency_records_purges (
	id        BIGINT         NOT NULL,
	`key`     VARBINARY(255) NULL,
	purged_at DATETIME(6)    NOT NULL,
	PRIMARY KEY (id),
	KEY purged_at_idx (purged_at)
) ENGINE = InnoDB;
