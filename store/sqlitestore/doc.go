// Package sqlitestore is a [store.Store] on a SQLite database file, built
// on database/sql and modernc.org/sqlite: a durable store for a service
// that runs on one machine, with no server to run beside it. It can also
// record a call's outcome inside the handler's own transaction on the
// same file ([Store.CompleteTx]), so that "the charge happened" and "the
// answer is recorded" commit together or not at all.
//
//	db, err := sqlitestore.Open("/var/lib/payments/idempotency.db")
//	if err != nil { … }
//	defer db.Close()
//	s := sqlitestore.New(db)
//	defer s.Close()
//	if err := s.Migrate(ctx); err != nil { … }
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(s)))
//
// # Driver
//
// modernc.org/sqlite is SQLite translated to Go: no cgo, so the store
// cross-compiles and builds in a scratch image like the rest of the
// module; it is a database/sql driver, so the application's transactions
// on the file are *sql.Tx, as with mysqlstore; and it is the most widely
// used pure-Go SQLite. github.com/ncruces/go-sqlite3, the other pure-Go
// choice, runs SQLite compiled to WebAssembly in a wasm runtime (wazero)
// inside the process, and its database/sql driver is a layer beside its
// own API rather than the API itself.
//
// # Table
//
// One row per key in one table ([DefaultTable], "idempotency_records",
// unless [WithTable] says otherwise), WITHOUT ROWID, so that a key's row
// is one lookup in the primary key's b-tree. [Store.Migrate] creates it,
// and is safe to call on every start from many processes at once;
// [Schema] is the same DDL (the file schema.sql) for your own migration
// tool. Keys, tokens, fingerprints and data are BLOBs, compared byte by
// byte. state is 1 in flight, 2 completed; expires_at is the end of the
// lease while in flight (of the keep, for an entry claimed with
// [store.ClaimOptions.Keep], whose lease ends at lease_until), and of the
// retention once completed. Times are whole milliseconds since the Unix
// epoch, read from SQLite's clock in each statement (unixepoch('subsec'),
// SQLite 3.42 or later): the clock of the process that runs it, which
// every process on the file shares, since they run on one host. A row
// whose lease or retention has run out counts as absent to every step.
// Owner tokens are made by [store.NewToken].
//
// # The claim
//
// A claim begins with a plain SELECT of the key's live row: in WAL mode a
// read takes no lock that a writer waits for, and waits for none. A
// completed row (a replay), an in-flight row, and an abandoned one the
// claim may not take over are returned as read: one read statement, which
// writes nothing and never waits for a handler's transaction. Only a key
// with no live row, or an abandoned one with the claim's fingerprint and
// [store.ClaimOptions.TakeOver], is written, by one statement, INSERT … ON
// CONFLICT DO UPDATE … RETURNING, which inserts the row, takes over an
// expired or abandoned one, or else returns the row another claim wrote
// since the read: the write decides, under SQLite's write lock, so of
// concurrent claims exactly one wins, in one process or in several. A
// new key costs a read and a write; an executed call a third statement,
// Complete (or the UPDATE of CompleteTx, inside the handler's
// transaction). Writing first would spare the read on a new key, but
// every replay would then wait for the write lock behind every write of
// every process on the file.
//
// Complete, Extend and Abandon are single UPDATEs fenced by the token,
// the state and the row's times; Release a DELETE, followed by a read
// when it deleted nothing (a key with no live row is released, one with
// another owner's row is not). SQLite counts the rows an UPDATE matched,
// so a Complete resent by the token that completed the row succeeds. A
// claim that fails releases its fresh token's row in case it landed, or
// abandons it when it may have taken over an abandoned entry. Every
// statement is prepared once on the pool.
//
// # One writer
//
// SQLite lets one transaction write to a file at a time; a write that
// finds the write lock taken waits for it up to the busy timeout, and then
// fails with SQLITE_BUSY. [Open] sets the busy timeout (5s by default), and
// begins every transaction IMMEDIATE (the driver's _txlock=immediate), so
// that a transaction takes the lock when it begins, waiting for it, rather
// than when it first writes, where SQLite fails a transaction whose
// snapshot is stale at once. Within a process, the store also queues its
// own writes on a channel, one at a time, so they do not poll for the lock
// in SQLite's busy handler (which sleeps a millisecond and more between
// tries); the busy timeout arbitrates with the other processes and with
// the application's transactions. A pool opened otherwise works too, given
// a busy timeout and WAL: without them, a step fails with SQLITE_BUSY
// when another connection writes, and replays wait for writers.
//
// A handler's transaction holds the write lock from its BEGIN (on a pool
// of [Open]) to its commit, and every other write waits for it, in every
// process on the file: other calls' claims and completions, the renewal
// of leases, the sweeper. Keep such transactions short, and within the
// busy timeout. A duplicate of the call is not held back: its claim is a
// read.
//
// # Several processes
//
// Processes on one host may share the file (a web process and workers):
// each opens it with [Open] and a Store of its own, the write lock is the
// file's, and each key still runs once (TestManyProcessesOneFile). The
// file must be on a local file system: SQLite's locks, and WAL's shared
// memory, do not work over a network file system. Processes on several
// machines need a shared store (Redis, PostgreSQL, MySQL).
//
// # Durability
//
// [Open] puts the file in WAL mode, where a commit appends to the
// write-ahead log, and sets synchronous ([WithSynchronous]):
//
//   - A crash of the process (a panic, SIGKILL, an out-of-memory kill)
//     loses nothing the store acknowledged, at either setting: a commit
//     is in the log, in the operating system's cache, when the step
//     returns, and the next process to open the file recovers it.
//   - A crash of the operating system, or a power loss, at
//     [SynchronousFull] (the default) loses nothing acknowledged either
//     (each commit syncs the log, given a disk that honours fsync). At
//     [SynchronousNormal], the log is synced at checkpoints only: the
//     transactions committed since the last one may roll back (each in
//     full; the file stays consistent). A completion rolled back that way
//     lets a retry run its handler again; a claim rolled back lets a
//     duplicate in.
//
// FULL costs an fsync per write (a claim of a new key, a completion);
// NORMAL none.
//
// # Cleanup
//
// Expired rows count as absent at once; a background sweeper
// ([WithSweepInterval], every minute by default) deletes them in batches
// ([WithSweepBatch]), each one DELETE under the write lock, or call
// [Store.Sweep] yourself. Any number of processes may sweep one file.
//
// # Inspection
//
// The store implements [store.Inspector]: [Store.Lookup] and
// [Store.Purge] read the key's row through the primary key, [Store.List]
// walks the primary key in key order, a page per statement (cursors
// "s1:" and the hex of the last key), and [Store.Stats] counts exactly,
// with one scan of the table.
//
// # Purges and the replay caches
//
// The store is a [store.Invalidator], through a purge log in the file (a
// table beside the records table, its name and _purges, which
// [Store.Migrate] creates, and adds to a file made before it): Purge
// writes one row per key it deletes, in the transaction of its DELETE,
// and each subscription ([Store.Invalidations], one per server with a
// replay cache) reads the rows after the last it read every second
// ([WithInvalidationInterval]), one read through the log's primary key
// that no writer waits for. A purge by any process on the file reaches
// every process's replay cache within one interval and one read after its
// commit. The ids are rowids taken under the write lock, so they are
// committed in order and a read never skips one. A purge deletes the
// log's rows older than an hour; a subscription that could not read the
// log for longer delivers All (drop everything) once it reads again. A
// purge on a file without its log fails and deletes nothing.
package sqlitestore
