package main

import (
	"fmt"
	"io"
	"strings"
)

// comparison is one table of BENCHMARKS.md: the rows of one benchmark, each
// with its cost per operation (time, unless unit says otherwise) as a ratio
// to a bare row of the same run (or, where against says so, to another
// baseline row of the table).
type comparison struct {
	title   string // the heading, naming the benchmark
	about   string // what the bare row is and what an operation is
	unit    string // the cost per operation compared; "" for ns/op, which has B/op and allocs/op beside it
	rate    string // a rate metric the rows report ("msgs/s"), shown in a column of its own; "" for none
	bench   string // the benchmark's name, which the rows' names start with
	against string // what the base rows are, for the ratio column's heading; "" for "bare"
	rows    []row
}

// row is one line of a comparison: a benchmark, and the bare row its cost
// per operation is divided by (itself for a bare row).
type row struct{ name, base string }

// comparisons returns the tables of the entry points against their bare
// baselines.
func comparisons() []comparison {
	do := comparison{
		title: "`Do` and `Once` against calling the function (`BenchmarkDo`)",
		about: "Bare calls the function directly; the other rows run it through `Do` or `Once` on a memory store, with a new key per call (executed) or one stored key (replay). An operation is one call; as the function does almost nothing, the difference in ns/op is what `Do` or `Once` adds.",
		bench: "BenchmarkDo",
	}
	mw := comparison{
		title: "`httpidempotency.Middleware` against the bare handler (`BenchmarkMiddleware`)",
		about: "Server rows send each request to an httptest server over loopback TCP (net/http's client and server and the network stack included); recorder rows call `ServeHTTP` with an `httptest.ResponseRecorder`, no network, so the middleware's own cost stands out. Each row compares with the bare handler of the same way. Memory store; an operation is one request.",
		bench: "BenchmarkMiddleware",
	}
	client := comparison{
		title: "`httpidempotency.Transport` against a bare `http.Client` (`BenchmarkTransport`)",
		about: "Bare is an `http.Client` that sets each request's `Idempotency-Key` itself; transport is the same client over `httpidempotency.Transport`, which mints a UUIDv4 per request, and transport-keyed finds the caller's key header. Server rows send each request to an httptest server over loopback TCP whose handler runs behind the middleware on a memory store, a new key every request (net/http's client and server, the network stack and the middleware included); stub rows send it to a RoundTripper that answers 201 in memory, so the transport's own cost stands out. Each row compares with bare of the same way. An operation is one request.",
		bench: "BenchmarkTransport",
	}
	for _, callers := range []string{"1", "64"} {
		do.rows = append(do.rows, variants("BenchmarkDo/", "/callers="+callers, "bare", "do-executed", "do-replay", "once-executed", "once-replay")...)
		for _, way := range []string{"server", "recorder"} {
			mw.rows = append(mw.rows, variants("BenchmarkMiddleware/"+way+"/", "/callers="+callers, "bare", "executed", "replay")...)
		}
		for _, way := range []string{"server", "stub"} {
			client.rows = append(client.rows, variants("BenchmarkTransport/"+way+"/", "/callers="+callers, "bare", "transport", "transport-keyed")...)
		}
	}
	stream := comparison{
		title: "Server streams against a bare stream (`BenchmarkStream`)",
		about: "A server stream of 100 messages of 64 bytes over bufconn; bare has no interceptor, executed runs under a new key (each message recorded, the outcome stored in a memory store), replayed is sent from the store. An operation is one whole stream; msgs/s counts the messages received.",
		rate:  "msgs/s",
		bench: "BenchmarkStream",
		rows:  variants("BenchmarkStream/", "", "bare", "executed", "replayed"),
	}
	clientStream := comparison{
		title: "Client streams against a bare stream (`BenchmarkClientStream`)",
		about: "A client stream of 100 messages of 64 bytes over bufconn; bare has no interceptor, executed runs under a new key (the messages held and fingerprinted, the handler run, the response stored in a memory store), replayed is answered from the store once the messages are in. An operation is one whole stream; msgs/s counts the messages sent.",
		rate:  "msgs/s",
		bench: "BenchmarkClientStream",
		rows:  variants("BenchmarkClientStream/", "", "bare", "executed", "replayed"),
	}
	connectUnary := comparison{
		title: "`connectidempotency` against bare connect-go handlers: unary (`BenchmarkConnect`)",
		about: "The TestService's `Do` over a real httptest server (loopback TCP, HTTP/1.1, the Connect protocol, binary Protobuf): connect-go's client and server, net/http and the network stack are in every row. Bare has no interceptor; the other rows run behind `connectidempotency.NewInterceptor` on a memory store, a new key per call (executed) or one stored key (replay). Each row compares with bare of its callers; an operation is one call.",
		bench: "BenchmarkConnect",
	}
	for _, callers := range []string{"1", "64"} {
		connectUnary.rows = append(connectUnary.rows, variants("BenchmarkConnect/unary/", "/callers="+callers, "bare", "executed", "replay")...)
	}
	connectStream := comparison{
		title: "`connectidempotency` against a bare connect-go handler: server streams (`BenchmarkConnect`)",
		about: "A server stream of 100 messages of 64 bytes over the same httptest server; bare has no interceptor, executed runs under a new key (each message recorded, the outcome stored in a memory store), replayed is sent from the store. An operation is one whole stream; msgs/s counts the messages received.",
		rate:  "msgs/s",
		bench: "BenchmarkConnect",
		rows:  variants("BenchmarkConnect/stream/", "", "bare", "executed", "replayed"),
	}
	pg := comparison{
		title: "PostgreSQL replays: a claim of a completed key against a SELECT (`BenchmarkClaimCompleted`)",
		about: "One completed key claimed again and again (the store step of a replay); the bare row is a plain `SELECT` of the row, claim-old the claim statement before the replay became a read (decision 50 of `docs/semantics/stores-sql.md`), on a table of its own. The paired row, in All results, alternates a SELECT and a claim and gives their median latencies and `claim/select`.",
		rate:  "ops/s",
		bench: "BenchmarkClaimCompleted",
	}
	for _, g := range []string{"1", "16"} {
		pg.rows = append(pg.rows, variants("BenchmarkClaimCompleted/goroutines="+g+"/", "", "select", "claim", "claim-old")...)
	}
	my := comparison{
		title: "MySQL replays: a claim of a completed key against a SELECT (`BenchmarkClaimCompletedMySQL`)",
		about: "One completed key claimed again and again (the store step of a replay) on MariaDB; the bare row is a plain `SELECT` of the row, prepared as the store's statements are. The paired row, in All results, alternates a SELECT and a claim and gives their median latencies and `claim/select`.",
		rate:  "ops/s",
		bench: "BenchmarkClaimCompletedMySQL",
	}
	for _, g := range []string{"1", "16"} {
		my.rows = append(my.rows, variants("BenchmarkClaimCompletedMySQL/goroutines="+g+"/", "", "select", "claim")...)
	}
	myUnary := comparison{
		title: "MySQL through gRPC against bare (`BenchmarkUnaryMySQL`)",
		about: "The bufconn unary calls of `BenchmarkUnary` on MariaDB over loopback, with a bare row of the same run: Echo behind the interceptor, a new key per call (executed: a SELECT, an INSERT and the complete) or one stored key (replay: one SELECT); and a handler whose transaction writes a ledger row, bare (tx-bare) or recording its answer with `CompleteTx` (tx-executed). The ceiling rows, in All results, run the same store steps with no gRPC.",
		bench: "BenchmarkUnaryMySQL",
	}
	floor := comparison{
		title: "The floor: an interceptor that only keeps and replays answers, against bare (`BenchmarkUnary`)",
		about: "The bufconn unary calls of `BenchmarkUnary`, a new key per call (executed) or one stored key (replay). The floor rows run them through an interceptor that keeps the serialized answer in a map under the key and, on a retry, decodes it and sets the replay marker: no fingerprint, no claim, no lease, no expiry, so not safe to use (`integration/floor_bench_test.go`). What it adds to bare bounds from below what any interceptor that stores and replays serialized answers adds; the memory rows are this library's interceptor on a memory store. Each row is divided by bare of its callers.",
		bench: "BenchmarkUnary",
	}
	instr := comparison{
		title: "The floor in instructions per call (`BenchmarkUnaryInstructions`)",
		about: "The rows of the table above and the replay cache's hits (redis-replay-cached, postgres-replay-cached, mysql-replay-cached), in instructions per call, counted by `scripts/bench-instructions.sh`: each row of `BenchmarkUnary` runs under valgrind's cachegrind with GOMAXPROCS=1, twice with different numbers of calls, and the difference of the two counts over the difference of the calls is one call's. The same binary and row give the same count to within 0.5%, where wall-clock ratios on this machine move by tens of percent. A count leaves out time spent waiting (for the scheduler, Redis, PostgreSQL or MySQL) and cache misses; crypto/sha256 is counted in its AVX2 code, as valgrind hides the CPU's SHA extensions, so the fingerprint costs more instructions here than it runs natively. Each row is divided by bare of its callers.",
		unit:  "instr/op",
		bench: "BenchmarkUnaryInstructions",
	}
	for _, callers := range []string{"1", "64"} {
		paths := []string{"bare", "floor-executed", "memory-executed", "floor-replay", "memory-replay"}
		floor.rows = append(floor.rows, variants("BenchmarkUnary/", "/callers="+callers, paths...)...)
		instr.rows = append(instr.rows, variants("BenchmarkUnaryInstructions/", "/callers="+callers, append(paths, "redis-replay-cached", "postgres-replay-cached", "mysql-replay-cached")...)...)
	}
	for _, callers := range []string{"1", "64"} {
		myUnary.rows = append(myUnary.rows, variants("BenchmarkUnaryMySQL/", "/callers="+callers, "bare", "mysql-executed", "mysql-replay", "mysql-tx-bare", "mysql-tx-executed")...)
	}
	all := []comparison{do, mw, client, stream, clientStream, connectUnary, connectStream, pg, my, myUnary, floor, instr}
	all = append(all, floorComparisons()...)
	all = append(all, sealing()...)
	return append(all, consumers()...)
}

// sealing returns the tables of the sealed memory rows of BenchmarkUnary
// against the unsealed ones, in time and in instructions per call.
func sealing() []comparison {
	about := "The memory rows of `BenchmarkUnary` (a new key per call, executed, or one stored key, replay) with every record sealed: `WithSealing` with one key, so every call keys its request's fingerprint (HMAC-SHA256), an executed call seals its outcome (AES-256-GCM) and a replay opens it. Each sealed row is divided by the unsealed row of its path and callers, measured in the same run; the unsealed rows are those of the tables above."
	tm := comparison{
		title:   "Sealed records against unsealed (`BenchmarkUnary`)",
		about:   about + " Rows run seconds apart differ by more than 5% on this machine with no change at all, so the time targets read the paired rows instead (`memory-sealed-paired-executed` and `-replay`, in All results): blocks of four calls per caller of a server without sealing and of one with it, in turn, each over a memory store of its own, whose `sealed/unsealed` is the median over the rounds of the ratio of the two blocks' times (their total times per call are `sealed-ns/op` and `unsealed-ns/op`).",
		bench:   "BenchmarkUnary",
		against: "unsealed",
	}
	instr := comparison{
		title:   "Sealed records against unsealed in instructions per call (`BenchmarkUnaryInstructions`)",
		about:   about + " Counted by `scripts/bench-instructions.sh`, as the floor in instructions per call above.",
		unit:    "instr/op",
		bench:   "BenchmarkUnaryInstructions",
		against: "unsealed",
	}
	for _, callers := range []string{"1", "64"} {
		for _, path := range []string{"executed", "replay"} {
			tm.rows = append(tm.rows, variants("BenchmarkUnary/", "/callers="+callers, "memory-"+path, "memory-sealed-"+path)...)
			instr.rows = append(instr.rows, variants("BenchmarkUnaryInstructions/", "/callers="+callers, "memory-"+path, "memory-sealed-"+path)...)
		}
	}
	return []comparison{tm, instr}
}

// consumers returns the tables of the message consumer packages against
// bare consumers of the same broker.
func consumers() []comparison {
	watermill := comparison{
		title: "`watermillidempotency.Middleware` against a bare router handler (`BenchmarkWatermill`)",
		about: "A router handler consumes messages published before the timer starts, each with a UUID of its own (executed), bare or behind the middleware on a memory store. rabbitmq rows consume a RabbitMQ queue through watermill-amqp, one message at a time, as a consumer of a real broker does; gochannel rows consume watermill's in-process pub/sub, no network, so the middleware's own cost stands out. Each row is timed from its first message handled to its last; an operation is one message, msgs/s counts them, and B/op and allocs/op count the whole process's allocations (the broker's client, and the in-process pub/sub) per message. Each row compares with bare of the same way.",
		rate:  "msgs/s",
		bench: "BenchmarkWatermill",
	}
	for _, way := range []string{"rabbitmq", "gochannel"} {
		watermill.rows = append(watermill.rows, variants("BenchmarkWatermill/"+way+"/", "", "bare", "executed")...)
	}
	return []comparison{
		{
			title: "`jetstreamidempotency.Processor` against a bare JetStream consumer (`BenchmarkJetStream`)",
			about: "A durable pull consumer of a NATS server embedded in the process (loopback) consumes the messages of a stream published before the timer starts, each a new message (executed). Bare acknowledges each with a double ack, which waits for the server's confirmation, as the Processor does, so the Processor's claim, run and stored outcome on a memory store are the only difference. An operation is one message, msgs/s counts them; B/op and allocs/op count the whole process's allocations, the embedded server's included, per message.",
			rate:  "msgs/s",
			bench: "BenchmarkJetStream",
			rows:  variants("BenchmarkJetStream/", "", "bare", "executed"),
		},
		{
			title: "`kafkaidempotency.Processor` against a bare consumer group member (`BenchmarkKafka`)",
			about: "A consumer group member consumes the records of a one-partition topic of franz-go's in-process cluster (kfake, on loopback), produced before the timer starts, each a new record (executed). Bare polls and marks each record for kgo's AutoCommitMarks in one goroutine; the Processor also claims, runs and stores each record's outcome on a memory store, on the partition's goroutine. Records arrive in batches, so bare costs well under a microsecond a record and the ratio is large: the difference in ns/op is what the Processor adds to each record. Each row is timed from its first record to its last, leaving out the group's join; an operation is one record, msgs/s counts them, and B/op and allocs/op count the whole process's allocations, the cluster's included, per record.",
			rate:  "msgs/s",
			bench: "BenchmarkKafka",
			rows:  variants("BenchmarkKafka/", "", "bare", "executed"),
		},
		watermill,
	}
}

// variants returns the rows prefix+v+suffix for each of vs, each compared
// with the first.
func variants(prefix, suffix string, vs ...string) []row {
	rows := make([]row, len(vs))
	for i, v := range vs {
		rows[i] = row{prefix + v + suffix, prefix + vs[0] + suffix}
	}
	return rows
}

// writeComparisons writes every table of comparisons with the medians of res.
func writeComparisons(w io.Writer, res results) {
	fmt.Fprintf(w, "\n## Entry points against their bare baselines\n\n")
	fmt.Fprintf(w, "Each row's time per operation (instructions per call where the table says so) is divided by its bare row's (the unsealed row's in the sealing tables), measured in the same run: 1.50x takes half as long again.\n")
	for _, c := range comparisons() {
		writeComparison(w, res, c)
	}
}

// writeComparison writes the table of c with the medians of res.
func writeComparison(w io.Writer, res results, c comparison) {
	fmt.Fprintf(w, "\n### %s\n\n%s\n\n", c.title, c.about)
	against := c.against
	if against == "" {
		against = "bare"
	}
	unit, vs := c.unit, c.unit+" vs "+against
	if unit == "" {
		unit, vs = "ns/op", "time vs "+against
	}
	head := []string{"row", unit}
	if c.rate != "" {
		head = append(head, c.rate)
	}
	if c.unit == "" {
		head = append(head, "B/op", "allocs/op")
	}
	head = append(head, vs)
	fmt.Fprintf(w, "%s\n|%s\n", tableRow(head), strings.Repeat("---|", len(head)))
	for _, r := range c.rows {
		cells := []string{"`" + strings.TrimPrefix(r.name, c.bench+"/") + "`", metric(res, r.name, unit)}
		if c.rate != "" {
			cells = append(cells, metric(res, r.name, c.rate))
		}
		if c.unit == "" {
			cells = append(cells, metric(res, r.name, "B/op"), metric(res, r.name, "allocs/op"))
		}
		cells = append(cells, ratio(res, r, unit))
		fmt.Fprintln(w, tableRow(cells))
	}
}

// metric returns the median of one metric of a row, or "–" when the row
// did not report it.
func metric(res results, name, unit string) string {
	v, ok := res.get(name, unit)
	if !ok {
		return "–"
	}
	return format(v)
}

// ratio returns r's cost per operation in unit over its bare row's, or
// "not measured" when either is missing.
func ratio(res results, r row, unit string) string {
	got, ok1 := res.get(r.name, unit)
	base, ok2 := res.get(r.base, unit)
	if !ok1 || !ok2 || base == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.2fx", got/base)
}
