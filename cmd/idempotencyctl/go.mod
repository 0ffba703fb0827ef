module github.com/grpc-idempotency/idempotency/cmd/idempotencyctl

go 1.26.0

// Modules of this repository, built from its working tree until they are
// tagged (docs/releasing.md).
replace (
	github.com/grpc-idempotency/idempotency => ../..
	github.com/grpc-idempotency/idempotency/store/mysqlstore => ../../store/mysqlstore
	github.com/grpc-idempotency/idempotency/store/postgresstore => ../../store/postgresstore
	github.com/grpc-idempotency/idempotency/store/redisstore => ../../store/redisstore
	github.com/grpc-idempotency/idempotency/store/sqlitestore => ../../store/sqlitestore
)

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/grpc-idempotency/idempotency v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/mysqlstore v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/postgresstore v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/redisstore v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/sqlitestore v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
)
