// Package redistest runs real redis-server processes for tests: a standalone
// server ([StartServer]), a three-master Redis Cluster ([StartCluster]),
// whose nodes can be stopped and restarted and whose slots can be migrated
// while clients run ([Cluster.MigrateSlot]), and a Sentinel-monitored
// master with replicas that fails over when its master dies
// ([StartSentinelWith]). Each process listens on a free
// loopback port, keeps its files in a directory from testing.TB.TempDir, runs
// with persistence turned off (--save "" --appendonly no), and is killed and
// reaped in testing.TB.Cleanup, together with every client handed out.
//
// Every helper first calls [Require]: without redis-server on PATH the test
// is skipped with a hint on how to install it, or fails when the environment
// variable IDEMPOTENCY_REQUIRE_REDIS is "1", so CI never skips silently.
//
// [RoundTrips] is a go-redis hook that counts the round trips a client makes,
// for proofs such as "an executed call costs exactly two round trips".
//
// The helpers take testing.TB, so benchmarks can use them too.
//
// It is published with redisstore for the tests of this repository's
// modules, which may require only published modules, and of services that
// use redisstore; its API follows the module's version.
package redistest
