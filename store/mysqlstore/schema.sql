-- The table of github.com/grpc-idempotency/idempotency/store/mysqlstore,
-- schema version 1, for MySQL 8.0 or later and MariaDB 10.6 or later
-- (InnoDB). (*Store).Migrate runs this file, with the table name of
-- mysqlstore.WithTable; run it with your own migration tool instead if you
-- prefer. The statement is idempotent.
--
-- One row per key. key, token, fingerprint and data are opaque bytes,
-- compared byte by byte (VARBINARY, never a collation). state: 1 in flight
-- (a handler holds the key under token until expires_at), 2 completed
-- (data is the outcome, kept until expires_at). expires_at is UTC, from
-- the database's UTC_TIMESTAMP(6). A row whose expires_at has passed
-- counts as absent: a claim takes it over, every other step ignores it,
-- and the sweeper deletes it. The primary key on key is what lets exactly
-- one claim of a key through; expires_at_idx serves the sweeper.
CREATE TABLE IF NOT EXISTS idempotency_records (
	`key`       VARBINARY(255) NOT NULL,
	state       TINYINT        NOT NULL,
	token       VARBINARY(64)  NOT NULL,
	fingerprint VARBINARY(255) NOT NULL,
	data        LONGBLOB       NULL,
	expires_at  DATETIME(6)    NOT NULL,
	PRIMARY KEY (`key`),
	KEY expires_at_idx (expires_at),
	CHECK (state IN (1, 2))
) ENGINE = InnoDB;
