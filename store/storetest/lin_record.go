package storetest

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grpc-idempotency/idempotency/store"
)

// linTTL is every lease, keep and retention of a recorded history: long
// enough that nothing runs out while it is recorded.
const linTTL = time.Hour

// linFingerprints are the fingerprints a history claims with, by index.
var linFingerprints = [][]byte{[]byte("storetest: fingerprint 0"), []byte("storetest: fingerprint 1")}

// linRecorder calls a store and records each call in a history.
type linRecorder struct {
	start time.Time
	// timeout bounds each call, so that a stalled connection makes the
	// call indeterminate rather than hanging the run.
	timeout time.Duration
	fences  bool // LinearizabilityConfig.Fences
	lossy   bool // LinearizabilityConfig.Failover

	mu       sync.Mutex
	ops      []porcupine.Operation
	unknowns int
	claims   int // the indeterminate claims, numbered
}

func newLinRecorder(timeout time.Duration, fences, lossy bool) *linRecorder {
	return &linRecorder{start: time.Now(), timeout: timeout, fences: fences, lossy: lossy}
}

// now is the monotonic time since the recording began.
func (r *linRecorder) now() int64 { return int64(time.Since(r.start)) }

// call runs in on s for client and records it. An indeterminate call is
// recorded as never returning, so that it may take effect at any time
// after it was made; an indeterminate Lookup changes nothing and is left
// out.
func (r *linRecorder) call(ctx context.Context, client int, s store.Store, in linInput) linOutput {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	in.fences, in.lossy = r.fences, r.lossy
	called := r.now()
	out := linDo(ctx, s, in)
	returned := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.unknown {
		r.unknowns++
		if in.op == opLookup {
			return out
		}
		returned = math.MaxInt64
		if in.op == opClaim {
			r.claims++
			in.claim = r.claims
			release := linInput{op: opReleaseFailed, key: in.key, claim: in.claim, fences: in.fences}
			r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: release, Call: called, Output: out, Return: returned})
		}
		if in.op == opComplete && r.lossy {
			lost := linInput{op: opCompleteLost, key: in.key, token: in.token, data: in.data, fences: in.fences, lossy: true}
			r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: lost, Call: called, Output: out, Return: returned})
		}
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: called, Output: out, Return: returned})
	return out
}

// history returns the recorded operations and how many were
// indeterminate.
func (r *linRecorder) history() ([]porcupine.Operation, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...), r.unknowns
}

// linDo makes the call in on s.
func linDo(ctx context.Context, s store.Store, in linInput) linOutput {
	switch in.op {
	case opClaim:
		opts := store.ClaimOptions{TakeOver: in.takeOver}
		if in.keep {
			opts.Keep = linTTL
		}
		c, err := s.Claim(ctx, in.key, linFingerprints[in.fp], linTTL, opts)
		if err != nil {
			return linFailed(err)
		}
		return linOutput{token: c.Token, attempt: c.Attempt, state: c.Existing.State, fp: linFingerprint(c.Existing.Fingerprint), data: string(c.Existing.Data)}
	case opComplete:
		return linFailed(s.Complete(ctx, in.key, in.token, []byte(in.data), linTTL))
	case opRelease:
		return linFailed(s.Release(ctx, in.key, in.token))
	case opExtend:
		return linFailed(s.Extend(ctx, in.key, in.token, linTTL))
	case opAbandon:
		return linFailed(s.Abandon(ctx, in.key, in.token))
	case opPurge:
		info, err := s.(store.Inspector).Purge(ctx, in.key, store.PurgeOptions{InFlight: in.inFlight, Token: in.token})
		return linInfo(info, err)
	case opLookup:
		info, err := s.(store.Inspector).Lookup(ctx, in.key)
		return linInfo(info, err)
	}
	panic("storetest: unknown operation")
}

// linInfo is the output of a Lookup or a Purge.
func linInfo(info store.Info, err error) linOutput {
	out := linFailed(err)
	if out.unknown || info.State == 0 {
		return out
	}
	out.state, out.fp, out.data, out.infoToken, out.attempt = info.State, linFingerprint(info.Fingerprint), string(info.Data), info.Token, info.Attempt
	return out
}

// linFingerprint is the index of fp among linFingerprints: -1 for a
// fingerprint no call claimed with (and 0 for none, as the model's zero
// entry has).
func linFingerprint(fp []byte) int {
	if fp == nil {
		return 0
	}
	for i, f := range linFingerprints {
		if string(f) == string(fp) {
			return i
		}
	}
	return -1
}

// linFailed classifies err: one of the contract's errors, an error the
// contract never gives here, or an indeterminate failure (a network
// error, a timeout) after which the call may or may not have taken
// effect.
func linFailed(err error) linOutput {
	switch {
	case err == nil:
		return linOutput{}
	case errors.Is(err, store.ErrLeaseLost):
		return linOutput{err: errLeaseLost}
	case errors.Is(err, store.ErrNotFound):
		return linOutput{err: errNotFound}
	case errors.Is(err, store.ErrInFlight):
		return linOutput{err: errInFlight}
	case errors.Is(err, store.ErrChanged):
		return linOutput{err: errChanged}
	case errors.Is(err, store.ErrCorrupt), errors.Is(err, store.ErrFull):
		return linOutput{err: errOther}
	}
	return linOutput{unknown: true, cause: err.Error()}
}
