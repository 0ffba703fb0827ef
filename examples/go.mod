module github.com/grpc-idempotency/idempotency/examples

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.35.1
	github.com/go-sql-driver/mysql v1.10.1
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0
	github.com/grpc-idempotency/idempotency v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/examples/payments/gen v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/gatewayidempotency v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/jetstreamidempotency v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/otelidempotency v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/mysqlstore v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/postgresstore v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/redisstore v0.0.0-00010101000000-000000000000
	github.com/grpc-idempotency/idempotency/store/sqlitestore v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	github.com/nats-io/nats.go v1.55.0
	github.com/prometheus/client_golang v1.24.1
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.72.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/prometheus v0.69.0
	go.opentelemetry.io/otel/exporters/stdout/stdoutmetric v1.47.0
	go.opentelemetry.io/otel/exporters/stdout/stdouttrace v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/otlptranslator v1.0.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261026165753-2ffab32bce7e // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
)

// Modules of this repository, built from its working tree until they are
// tagged (docs/releasing.md).
replace (
	github.com/grpc-idempotency/idempotency => ..
	github.com/grpc-idempotency/idempotency/examples/payments/gen => ./payments/gen
	github.com/grpc-idempotency/idempotency/gatewayidempotency => ../gatewayidempotency
	github.com/grpc-idempotency/idempotency/jetstreamidempotency => ../jetstreamidempotency
	github.com/grpc-idempotency/idempotency/otelidempotency => ../otelidempotency
	github.com/grpc-idempotency/idempotency/store/mysqlstore => ../store/mysqlstore
	github.com/grpc-idempotency/idempotency/store/postgresstore => ../store/postgresstore
	github.com/grpc-idempotency/idempotency/store/redisstore => ../store/redisstore
	github.com/grpc-idempotency/idempotency/store/sqlitestore => ../store/sqlitestore
)
