package storetest

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/grpc-idempotency/idempotency/store"
)

// The sequential model that [RunLinearizability] checks histories
// against: one key's entry, as the store contract (store.Store and
// store.Inspector) describes it, with leases, keeps and retentions too long
// to run out while a history is recorded. Time is left to the conformance
// suite's Expiry and Abandoned cases; an entry becomes abandoned here only
// through Abandon.

// linOp names a store operation of a history.
type linOp uint8

const (
	opClaim linOp = iota + 1
	opComplete
	opRelease
	opExtend
	opAbandon
	opPurge
	opLookup
	// opReleaseFailed is not a call: it stands for the release a store
	// may make on its own with the token of a claim that failed after it
	// was sent, so that no claim nobody owns blocks the key (a failed
	// take-over is abandoned again instead): recorded beside each
	// indeterminate claim, as indeterminate too.
	opReleaseFailed
	// opCompleteLost is not a call either: it stands for a failover that
	// loses the completion an indeterminate Complete made, which the
	// replica promoted never received (LinearizabilityConfig.Failover):
	// recorded beside each indeterminate Complete, as indeterminate too.
	opCompleteLost
)

var linOpNames = [...]string{opClaim: "Claim", opComplete: "Complete", opRelease: "Release", opExtend: "Extend", opAbandon: "Abandon", opPurge: "Purge", opLookup: "Lookup", opReleaseFailed: "release of a failed claim", opCompleteLost: "loss of a failed completion"}

func (o linOp) String() string { return linOpNames[o] }

// pseudo reports whether o stands for something else than a call.
func (o linOp) pseudo() bool { return o == opReleaseFailed || o == opCompleteLost }

// linInput is one call: the key, and what the operation was given.
type linInput struct {
	op  linOp
	key string
	// fp is the fingerprint's index among the workload's fingerprints
	// (Claim).
	fp       int
	keep     bool // Claim: a positive Keep
	takeOver bool // Claim
	// token is the owner token of Complete, Release, Extend and Abandon,
	// and the fence of a Purge (empty: no fence).
	token    string
	data     string // Complete
	inFlight bool   // Purge
	// claim numbers an indeterminate Claim, and the opReleaseFailed
	// recorded beside it.
	claim int
	// fences is LinearizabilityConfig.Fences: the store's Info.Token is a
	// fence made per call, which the model neither binds nor compares.
	fences bool
	// lossy is LinearizabilityConfig.Failover: a completion made by an
	// indeterminate Complete may be lost later (opCompleteLost).
	lossy bool
}

// linErr is the outcome class of a call.
type linErr uint8

const (
	errNone linErr = iota
	errLeaseLost
	errNotFound
	errInFlight
	errChanged
	// errOther is an error the contract never gives for these calls
	// (ErrCorrupt, ErrFull, an argument error): no state allows it.
	errOther
)

var linErrNames = [...]string{errNone: "ok", errLeaseLost: "ErrLeaseLost", errNotFound: "ErrNotFound", errInFlight: "ErrInFlight", errChanged: "ErrChanged", errOther: "unexpected error"}

func (e linErr) String() string { return linErrNames[e] }

// linOutput is what a call returned. An indeterminate call (its reply was
// lost, it timed out, its connection broke) has unknown set and nothing
// else: the model lets it have taken effect or not.
type linOutput struct {
	unknown bool
	cause   string // the error of an indeterminate call
	err     linErr
	// token and attempt are a won claim's.
	token   string
	attempt int
	// The entry a Claim found, or Lookup and Purge returned: state 0 for
	// none. infoToken is Info.Token (Lookup, Purge).
	state     store.State
	fp        int
	data      string
	infoToken string
}

// linEntry is the model's state: one key's entry. It is a value (every
// field comparable), so the checker compares states with ==.
type linEntry struct {
	state store.State // 0: no entry
	// owner is the owner token of the claim that made the entry (and
	// completed it); for a claim whose reply was lost, failedOwner of its
	// number, which no call knows.
	owner string
	// info is the entry's Info.Token once a Lookup or a Purge showed it:
	// the owner token, or derived from it ([store.Info]).
	info    string
	fp      int
	data    string
	attempt int
	keep    bool
	// lossy is set on an entry completed by an indeterminate Complete
	// (LinearizabilityConfig.Failover) until an acknowledged Complete of
	// its owner confirms it: a failover may still lose the completion,
	// and the entry is then again as it was before, in state before.
	// before is only set while lossy.
	lossy  bool
	before store.State
}

// linModel is the model for porcupine, partitioned by key.
func linModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{linEntry{}} },
		Step: func(state, input, output any) []any {
			return linStep(state.(linEntry), input.(linInput), output.(linOutput))
		},
		DescribeOperation: func(input, output any) string {
			return describeLinOp(input.(linInput), output.(linOutput))
		},
		DescribeState: func(state any) string { return describeLinEntry(state.(linEntry)) },
	}
	return nm.ToModel()
}

// partitionByKey splits a history into one history per key: the store's
// keys are independent.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(linInput).key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	parts := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, byKey[k])
	}
	return parts
}

// noInfo stands, while a purge is stepped, for an Info.Token known not to
// be the purge's fence.
const noInfo = "\x00storetest: not the fence"

// linStep returns the states the entry may be in after the call, given
// what it returned: none when the store could not have returned that. A
// purge fenced by the owner token of an entry whose Info.Token nobody has
// seen may find it the entry's Info.Token or not: both are stepped.
func linStep(s linEntry, in linInput, out linOutput) []any {
	if in.fences {
		s.info = ""
	}
	if in.op != opPurge || in.token == "" || s.info != "" || (in.token != s.owner && !in.fences) {
		return linStepKnown(s, in, out)
	}
	fenced, other := s, s
	fenced.info, other.info = in.token, noInfo
	states := linStepKnown(fenced, in, out)
	for _, st := range linStepKnown(other, in, out) {
		if e := st.(linEntry); e.info == noInfo {
			e.info = ""
			st = e
		}
		states = append(states, st)
	}
	return states
}

// linStepKnown is linStep once it is known whether a purge's fence is
// the entry's Info.Token.
func linStepKnown(s linEntry, in linInput, out linOutput) []any {
	next, want := linApply(s, in)
	if out.unknown {
		if in.op == opClaim && want.token != "" {
			next.owner = failedOwner(in.claim)
		}
		if in.op == opComplete && in.lossy && next.state != s.state {
			next.lossy = true
		}
		if next == s {
			return []any{s}
		}
		return []any{s, next}
	}
	if out.err != want.err {
		return nil
	}
	switch in.op {
	case opClaim:
		if want.token == "" { // the key was taken: the entry found
			if out.token != "" || !sameEntry(out, want) {
				return nil
			}
			return []any{s}
		}
		// Won: the token is fresh, the attempt counted.
		if out.token == "" || out.token == s.owner || out.attempt != want.attempt || out.state != 0 {
			return nil
		}
		next.owner = out.token
		return []any{next}
	case opComplete:
		if want.err == errNone {
			// An acknowledged Complete of the owner is on the replicas, and
			// so is the completion it found, if it found one: no failover
			// loses it.
			next.lossy, next.before = false, 0
		}
	case opLookup, opPurge:
		if want.err == errNone || want.err == errInFlight || want.err == errChanged {
			if !sameEntry(out, want) || out.infoToken == "" || !in.fences && !sameToken(out.infoToken, s.info) {
				return nil
			}
			if in.op == opLookup && out.attempt != want.attempt && (s.state != store.StateCompleted || out.attempt != 0) {
				return nil
			}
			if next.state != 0 && !in.fences && (next.info == "" || next.info == noInfo) { // the reply shows the Info.Token
				next.info = out.infoToken
			}
		}
	}
	return []any{next}
}

// failedOwner is the owner the model gives the claim numbered n, whose
// reply was lost.
func failedOwner(n int) string { return fmt.Sprintf("\x00storetest: failed claim %d", n) }

// sameEntry reports whether the entry a call returned is the one the
// model holds: the same state and fingerprint, and the same data once
// completed.
func sameEntry(out, want linOutput) bool {
	return out.state == want.state && out.fp == want.fp && out.data == want.data
}

// sameToken reports whether a reply's Info.Token is the entry's: any
// token is while nobody has seen it.
func sameToken(reply, info string) bool {
	return info == "" || info == noInfo || reply == info
}

// linApply is the contract: the entry after the call and what the call
// returns, with a won claim's token left empty (the store picks it).
func linApply(s linEntry, in linInput) (linEntry, linOutput) {
	found := linOutput{state: s.state, fp: s.fp, data: s.data, attempt: s.attempt, infoToken: s.info}
	owned := in.token != "" && in.token == s.owner
	switch in.op {
	case opClaim:
		switch {
		case s.state == 0:
			return linEntry{state: store.StateInFlight, fp: in.fp, attempt: 1, keep: in.keep}, linOutput{token: "won", attempt: 1}
		case s.state == store.StateAbandoned && in.takeOver && in.fp == s.fp:
			// A take-over keeps the entry's keep and counts the attempt.
			return linEntry{state: store.StateInFlight, fp: s.fp, attempt: s.attempt + 1, keep: s.keep}, linOutput{token: "won", attempt: s.attempt + 1}
		}
		return s, linOutput{state: s.state, fp: s.fp, data: s.data}
	case opComplete:
		switch {
		case owned && s.state != store.StateCompleted:
			if in.lossy {
				s.before = s.state
			}
			s.state, s.data = store.StateCompleted, in.data
			return s, linOutput{}
		case owned: // a repeat of the Complete that completed it
			return s, linOutput{}
		}
		return s, linOutput{err: errLeaseLost}
	case opRelease:
		switch {
		case s.state == 0:
			return s, linOutput{}
		case owned && s.state != store.StateCompleted:
			return linEntry{}, linOutput{}
		}
		return s, linOutput{err: errLeaseLost}
	case opExtend:
		if owned && s.state == store.StateInFlight {
			return s, linOutput{}
		}
		return s, linOutput{err: errLeaseLost}
	case opAbandon:
		switch {
		case owned && s.state == store.StateInFlight && s.keep:
			s.state = store.StateAbandoned
			return s, linOutput{}
		case owned && s.state == store.StateInFlight:
			return linEntry{}, linOutput{}
		case owned && s.state == store.StateAbandoned:
			return s, linOutput{}
		}
		return s, linOutput{err: errLeaseLost}
	case opPurge:
		return linPurge(s, in, found)
	case opReleaseFailed:
		switch {
		case s.owner != failedOwner(in.claim) || s.state == store.StateCompleted:
		case s.attempt > 1: // a take-over is abandoned again, not released
			s.state = store.StateAbandoned
		default:
			return linEntry{}, linOutput{}
		}
		return s, linOutput{}
	case opCompleteLost:
		if s.lossy && s.state == store.StateCompleted && s.owner == in.token && s.data == in.data {
			s.state, s.data, s.lossy, s.before = s.before, "", false, 0
		}
		return s, linOutput{}
	case opLookup:
		if s.state == 0 {
			return s, linOutput{err: errNotFound}
		}
		return s, found
	}
	panic(fmt.Sprintf("storetest: unknown operation %d", in.op))
}

// linPurge is Inspector.Purge: a refused purge returns the entry it found
// with its error.
func linPurge(s linEntry, in linInput, found linOutput) (linEntry, linOutput) {
	switch {
	case s.state == 0:
		return s, linOutput{err: errNotFound}
	case in.token != "" && in.token != s.info:
		found.err = errChanged
		return s, found
	case !in.inFlight && s.state != store.StateCompleted:
		found.err = errInFlight
		return s, found
	case in.inFlight && s.state == store.StateCompleted:
		found.err = errChanged
		return s, found
	}
	return linEntry{}, found
}

// describeLinOp is an operation as the visualization shows it.
func describeLinOp(in linInput, out linOutput) string {
	var args string
	switch in.op {
	case opClaim:
		args = fmt.Sprintf("fp%d keep=%t takeOver=%t", in.fp, in.keep, in.takeOver)
	case opComplete:
		args = fmt.Sprintf("%s, %q", short(in.token), in.data)
	case opPurge:
		args = fmt.Sprintf("inFlight=%t token=%s", in.inFlight, short(in.token))
	case opLookup:
	case opReleaseFailed:
		args = fmt.Sprintf("claim %d", in.claim)
	case opCompleteLost:
		args = fmt.Sprintf("%s, %q", short(in.token), in.data)
	default:
		args = short(in.token)
	}
	var res string
	switch {
	case out.unknown:
		res = "unknown: " + out.cause
	case in.op == opClaim && out.token != "":
		res = fmt.Sprintf("won %s attempt %d", short(out.token), out.attempt)
	case out.state != 0:
		res = fmt.Sprintf("%v {%v fp%d %q %s}", out.err, out.state, out.fp, out.data, short(out.infoToken))
	default:
		res = out.err.String()
	}
	return fmt.Sprintf("%v(%s) → %s", in.op, args, res)
}

// describeLinEntry is a state as the visualization shows it.
func describeLinEntry(s linEntry) string {
	if s.state == 0 {
		return "no entry"
	}
	return fmt.Sprintf("%v owner %s fp%d attempt %d keep=%t data %q", s.state, short(s.owner), s.fp, s.attempt, s.keep, s.data)
}

// short abbreviates a token for the visualization.
func short(token string) string {
	switch {
	case token == "":
		return "-"
	case len(token) > 8:
		return token[len(token)-8:]
	}
	return token
}
