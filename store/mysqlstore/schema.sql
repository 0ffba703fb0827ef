-- The table of github.com/grpc-idempotency/idempotency/store/mysqlstore,
-- schema version 3 with its purge log (purgelog.sql), for MySQL 8.0 or
-- later and MariaDB 10.6 or later (InnoDB). (*Store).Migrate runs this
-- file, with the table name of mysqlstore.WithTable; run it with your own
-- migration tool instead if you prefer. The statement is idempotent. A
-- table of version 1 (without lease_until and attempt) is brought to
-- version 2 by upgrade.sql, which Migrate runs too when a column is
-- missing; version 3 adds the purge log, purgelog.sql, which Migrate
-- creates when it is missing.
--
-- One row per key. key, token, fingerprint and data are opaque bytes,
-- compared byte by byte (VARBINARY, never a collation). state: 1 in flight
-- (a handler holds the key under token until its lease ends), 2 completed
-- (data is the outcome, kept until expires_at). expires_at is UTC, from
-- the database's UTC_TIMESTAMP(6). A row whose expires_at has passed
-- counts as absent: a claim takes it over, every other step ignores it,
-- and the sweeper deletes it. The primary key on key is what lets exactly
-- one claim of a key through; expires_at_idx serves the sweeper.
--
-- lease_until is NULL for a claim without Keep, whose lease ends at
-- expires_at. A claim with Keep has its lease end in lease_until and
-- expires_at = lease_until + Keep: from lease_until to expires_at the row
-- is abandoned (state stays 1; the store reads it as abandoned). attempt
-- counts the claims of the key that ran a handler: 1, plus one per
-- take-over of an abandoned row.
CREATE TABLE IF NOT EXISTS idempotency_records (
	`key`       VARBINARY(255) NOT NULL,
	state       TINYINT        NOT NULL,
	token       VARBINARY(64)  NOT NULL,
	fingerprint VARBINARY(255) NOT NULL,
	data        LONGBLOB       NULL,
	expires_at  DATETIME(6)    NOT NULL,
	lease_until DATETIME(6)    NULL,
	attempt     INT            NOT NULL DEFAULT 1,
	PRIMARY KEY (`key`),
	KEY expires_at_idx (expires_at),
	CHECK (state IN (1, 2))
) ENGINE = InnoDB;
