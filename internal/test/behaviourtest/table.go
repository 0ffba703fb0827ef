package behaviourtest

import (
	"time"

	"github.com/grpc-idempotency/idempotency"
)

// sizeLimit is the outcome size limit (WithMaxResponseBytes) of the
// situations where the outcome is too large.
const sizeLimit = 1024

// situation is one row of the table of docs/semantics/README.md: the server's
// options and the store's faults, the script of the work's executions,
// the calls with what every entry point answers, and how many times the
// work runs in all.
type situation struct {
	name    string
	opts    []idempotency.ServerOption
	key     string // the client's key, when not one of the subtest's own
	down    bool   // the store is down
	full    bool   // the store refuses new keys as full
	corrupt bool   // the store keeps garbage instead of each outcome
	script  []run
	steps   []step
	runs    int
	lost    int // the execution whose context must end with store.ErrLeaseLost
	// skip names the entry points a situation cannot arise at, and why.
	skip map[kind]string
}

type op int

const (
	opCall         op = iota // make a call and check its answer
	opStart                  // start a call
	opFinish                 // wait for call n to end and check its answer
	opAwaitRun               // wait until execution n has started
	opAwaitClaims            // wait until the store has seen n claims
	opAwaitSettled           // wait until n claims were completed or released
	opOpen                   // open the gate the held executions wait at
	opLeave                  // call n's caller leaves: cancel it, wait until the entry point sees it
	opEvict                  // the store evicts the claim held
)

type step struct {
	op   op
	req  int // opCall, opStart: the request variant
	n    int
	want want
}

func call(w want) step          { return step{op: opCall, want: w} }
func callOther(w want) step     { return step{op: opCall, req: 1, want: w} }
func start() step               { return step{op: opStart} }
func finish(n int, w want) step { return step{op: opFinish, n: n, want: w} }
func awaitRun(n int) step       { return step{op: opAwaitRun, n: n} }
func awaitClaims(n int) step    { return step{op: opAwaitClaims, n: n} }
func awaitSettled(n int) step   { return step{op: opAwaitSettled, n: n} }
func leave(n int) step          { return step{op: opLeave, n: n} }
func openGate() step            { return step{op: opOpen} }
func evict() step               { return step{op: opEvict} }

// The answers of the table.
var (
	// ran: the work ran for the call and answered.
	ran = want{ran: true, grpc: "OK", fn: "OK", http: 200}
	// refused: the work's deterministic error, PERMISSION_DENIED; over
	// HTTP a kept 4xx, 422 (DefaultKeep does not keep 403: decision 113).
	refused = want{ran: true, grpc: "PermissionDenied", fn: "PermissionDenied", http: 422}
	// flaked: the work's retryable error, UNAVAILABLE (503).
	flaked = want{ran: true, grpc: "Unavailable", fn: "Unavailable", http: 503}
	// crashed: the work panicked; a recovery interceptor answers INTERNAL,
	// net/http's recovery middleware 500, and Do and Once let the panic go
	// on to their caller.
	crashed = want{ran: true, grpc: "Internal", fn: "panic", http: 500}
	// gone: the caller left while its work ran; Do and Once return when
	// the work does.
	gone = want{ran: true, grpc: "Canceled", fn: "OK"}
	// inUse, reused, unavailable, full: the library refuses the call.
	inUse       = want{reason: idempotency.ErrKeyInUse.Reason, grpc: "Aborted", fn: "error", http: 409, retry: true}
	reused      = want{reason: idempotency.ErrKeyReused.Reason, grpc: "FailedPrecondition", fn: "error", http: 422}
	unavailable = want{reason: idempotency.ErrStoreUnavailable.Reason, grpc: "Unavailable", fn: "error", http: 503, retry: true}
	full        = want{reason: idempotency.ErrStoreFull.Reason, grpc: "ResourceExhausted", fn: "error", http: 503, retry: true}
	invalidKey  = want{reason: idempotency.ErrKeyInvalid.Reason, grpc: "InvalidArgument", fn: "error", http: 400}
	corrupt     = want{reason: idempotency.ErrRecordCorrupt.Reason, grpc: "Internal", fn: "error", http: 500}
	// notRetained: the replay of an outcome too large to keep.
	notRetained = want{replayed: true, reason: idempotency.ErrResponseNotRetained.Reason, grpc: "FailedPrecondition", fn: "error", http: 400}
)

// replayOf is the replay of call n's answer (nil: of an answer the call
// did not get, its caller having left).
func replayOf(w want, n int) want {
	w.ran, w.replayed, w.same = false, true, n
	return w
}

func situations(cfg config) []situation {
	return []situation{{
		name:  "NewKey",
		steps: []step{call(ran)},
		runs:  1,
	}, {
		name:  "Replay",
		steps: []step{call(ran), call(replayOf(ran, 1))},
		runs:  1,
	}, {
		name:   "InFlight",
		script: []run{{hold: gate}},
		steps: []step{
			start(), awaitRun(1), call(inUse), openGate(), finish(1, ran),
			call(replayOf(ran, 1)),
		},
		runs: 1,
	}, {
		name:   "InFlightWait",
		opts:   []idempotency.ServerOption{idempotency.WithWaitForInFlight(time.Minute)},
		script: []run{{hold: gate}},
		steps: []step{
			start(), awaitRun(1), start(), awaitClaims(2), openGate(),
			finish(1, ran), finish(2, replayOf(ran, 1)),
		},
		runs: 1,
	}, {
		name:  "KeyInvalid",
		key:   "a key",
		steps: []step{call(invalidKey)},
	}, {
		name:  "KeyReused",
		steps: []step{call(ran), callOther(reused)},
		runs:  1,
	}, {
		name:   "KeyReusedInFlight",
		script: []run{{hold: gate}},
		steps:  []step{start(), awaitRun(1), callOther(reused), openGate(), finish(1, ran)},
		runs:   1,
	}, {
		name:   "DeterministicError",
		script: []run{{act: refuse}},
		steps:  []step{call(refused), call(replayOf(refused, 1))},
		runs:   1,
	}, {
		name:   "RetryableError",
		script: []run{{act: flake}},
		steps:  []step{call(flaked), call(ran), call(replayOf(ran, 2))},
		runs:   2,
	}, {
		name:   "Panic",
		script: []run{{act: crash}},
		steps:  []step{call(crashed), call(ran), call(replayOf(ran, 2))},
		runs:   2,
	}, {
		name:   "CallerLeaves",
		script: []run{{hold: gate}},
		steps: []step{
			start(), awaitRun(1), leave(1), openGate(), awaitSettled(1),
			finish(1, gone), call(replayOf(ran, 0)),
		},
		runs: 1,
	}, {
		// The store loses the claim while the work runs: the work's
		// context ends with store.ErrLeaseLost at the next renewal, its
		// answer still reaches its caller, its completion is refused, and
		// the key, free again, runs for the next call, whose outcome the
		// late completion did not overwrite.
		name:   "LeaseLost",
		opts:   []idempotency.ServerOption{idempotency.WithLease(cfg.lease)},
		script: []run{{hold: ctxDone}},
		steps: []step{
			start(), awaitRun(1), evict(), finish(1, ran),
			call(ran), call(replayOf(ran, 2)),
		},
		runs: 2,
		lost: 1,
	}, {
		name:  "StoreDown",
		down:  true,
		steps: []step{call(unavailable), call(unavailable)},
	}, {
		name:  "StoreDownFailOpen",
		opts:  []idempotency.ServerOption{idempotency.WithFailOpen()},
		down:  true,
		steps: []step{call(ran), call(ran)},
		runs:  2,
	}, {
		name:  "StoreFull",
		full:  true,
		steps: []step{call(full), call(full)},
	}, {
		name:    "RecordCorrupt",
		corrupt: true,
		steps:   []step{call(ran), call(corrupt)},
		runs:    1,
	}, {
		name:   "ResponseTooLarge",
		opts:   []idempotency.ServerOption{idempotency.WithMaxResponseBytes(sizeLimit)},
		script: []run{{act: bulky}},
		steps:  []step{call(ran), call(notRetained)},
		runs:   1,
		skip:   map[kind]string{once: "Once has no response"},
	}, {
		name:   "ErrorTooLarge",
		opts:   []idempotency.ServerOption{idempotency.WithMaxResponseBytes(sizeLimit)},
		script: []run{{act: bulkyRefuse}},
		steps:  []step{call(refused), call(notRetained)},
		runs:   1,
	}}
}
