-- Brings a table of github.com/grpc-idempotency/idempotency/store/mysqlstore
-- from schema version 1 to version 2 (see schema.sql): the columns of
-- claims kept beyond their lease (abandoned claims). Run it once, with your
-- own migration tool, on a table that schema.sql created before version 2;
-- (*Store).Migrate runs it, one column at a time, when a column is missing.
-- Both columns are added at the end of the row, with a default, which
-- MySQL 8.0.12 and later and MariaDB 10.3 and later do in place, without
-- copying the table (ALGORITHM=INSTANT); the statement still waits for
-- the transactions that use the table (its metadata lock).
ALTER TABLE idempotency_records
	ADD COLUMN lease_until DATETIME(6) NULL,
	ADD COLUMN attempt INT NOT NULL DEFAULT 1;
