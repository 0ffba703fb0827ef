// Command idempotencyctl looks up, lists, purges, counts and resolves the
// keys of an idempotency server's store: what an operator needs to answer
// "a customer says they were charged twice: what happened to key
// order-1042?" and to repair a key, or to resolve one blocked after a
// crash.
//
//	idempotencyctl --addr admin.internal:9090 --header x-operator-token=$TOKEN \
//	    get --method /shop.v1.Payments/Charge --scope acme --key order-1042
//	idempotencyctl --addr … list --state in_flight --older-than 5m
//	idempotencyctl --addr … purge STORE_KEY --etag ETAG
//	idempotencyctl --addr … stats
//	idempotencyctl --addr … list --state abandoned
//	idempotencyctl --addr … resolve STORE_KEY --etag ETAG --rerun
//
// It reaches the admin service (idempotency.admin.v1.AdminService, package
// admin) that a server registers, with --addr; or, when that service is
// down, the store itself, with --redis, --redis-cluster, --redis-sentinel,
// --postgres, --mysql (a MySQL or MariaDB store, named by a
// go-sql-driver/mysql DSN) or --sqlite (a SQLite store, named by the path
// of its database file on this host), through the same code the service
// runs, in process. Its output is a person's by default and protojson of the admin
// messages with --json. It exits 0 on success, 1 on an error, 2 on a
// command line that cannot work, 3 when the key holds no live entry, 4
// when a purge or a resolution is refused, 5 when the admin service refuses the caller,
// and 6 when get finds a sealed record that does not open (a store
// reached directly has no sealing keys).
//
// Install it from a clone of the repository with
// go install ./cmd/idempotencyctl. The guide, and the runbook built on it,
// are in [the operations guide].
//
// [the operations guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#the-command-line-idempotencyctl
package main
