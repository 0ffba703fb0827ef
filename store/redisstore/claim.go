package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
)

// Claim implements [store.Store.Claim] with one native command,
//
//	SET key entry NX GET PX lease
//
// which claims a free key or returns the entry already there, all that a
// replay needs. With [store.ClaimOptions.Keep], the entry is a kept one
// (see Layout in the package documentation) and PX is the lease plus
// Keep. A SET that finds a kept entry of another claim is followed by one
// more round trip, keptClaimScript, which tells from the key's PTTL
// whether it is still in flight or abandoned, and takes an abandoned one
// over ([store.ClaimOptions.TakeOver]). It returns an error wrapping
// [store.ErrFull] when Redis refuses the write of a new claim (a take-over
// too) for lack of memory (OOM, with maxmemory-policy noeviction), and
// with [WithMinReplicas] an error wrapping [ErrTooFewReplicas] when too
// few replicas acknowledged a new claim in time (which it then releases,
// or, for a take-over, abandons again).
//
// When the claim fails with any other error once it was sent, Claim first
// releases, fenced by the claim's fresh token, the claim it may have made
// after all (see Failed claims in the package documentation), so that it
// never leaves behind a claim nobody owns. A context already done is
// reported before anything is sent. A caller whose context ends once its
// claim went out in a shared round trip gets its context's error at once;
// the release then follows that round trip (see Shared round trips in the
// package documentation).
func (s *Store) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	ms, err := millis("lease", lease)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if err := checkClaimArgs(fingerprint); err != nil {
		return store.ClaimResult{}, err
	}
	var keep int64
	switch {
	case opts.Keep < 0:
		return store.ClaimResult{}, fmt.Errorf("redisstore: keep must not be negative, got %v", opts.Keep)
	case opts.Keep > 0:
		keep, _ = millis("keep", opts.Keep)
	}
	rkey := s.prefix + key
	if err := ctx.Err(); err != nil {
		return store.ClaimResult{}, fmt.Errorf("redisstore: claim %q: %w", rkey, err)
	}
	cl := newClaim(s, rkey, store.NewToken(), fingerprint, ms, keep, opts.TakeOver)
	c, err := cl.run(ctx)
	if err != nil {
		return store.ClaimResult{}, fmt.Errorf("redisstore: claim %q: %w", rkey, err)
	}
	return c, nil
}

// claim is one Claim on its way.
type claim struct {
	s           *Store
	rkey        string
	token       string
	fingerprint []byte
	value       []byte // the entry the claim writes
	ms          int64  // its PX: the lease, plus Keep for a kept entry
	lease       int64  // the lease in milliseconds
	takeOver    bool
	// legacyRead is set once the claim went to legacyClaimScript, which
	// keptClaimScript sends it to at most once: a key that changes type
	// back and forth under the claim ends it as corrupt.
	legacyRead bool
}

// newClaim returns the claim of rkey by token, for lease milliseconds,
// kept keep milliseconds longer when keep is positive.
func newClaim(s *Store, rkey, token string, fingerprint []byte, lease, keep int64, takeOver bool) claim {
	c := claim{s: s, rkey: rkey, token: token, fingerprint: fingerprint, ms: lease, lease: lease, takeOver: takeOver}
	if keep > 0 {
		c.value = encodeKept(token, fingerprint, keep, 1)
		c.ms = lease + keep
	} else {
		c.value = encodeInFlight(token, fingerprint)
	}
	return c
}

// run sends the SET and reads its answer: nil when it claimed the key, the
// entry there otherwise. Redis answers WRONGTYPE for a key that holds a
// layout 1 hash (or a value of another type), which the legacy claim
// script then reads, and OOM when it is full: SET is refused before it
// runs, even on a key that holds an entry, so a GET then reads it.
func (c claim) run(ctx context.Context) (store.ClaimResult, error) {
	wait := c.s.minReplicas > 0
	r := newRequest(ctx, c.rkey, wait, "set", c.rkey, c.value, "nx", "get", "px", c.ms)
	if wasSent, err := c.s.do(ctx, r); err != nil {
		return c.notDone(ctx, r, wasSent, err)
	}
	v, err := r.cmd.Text()
	switch {
	case err == nil:
		return c.found(ctx, v)
	case errors.Is(err, redis.Nil):
		return c.won(ctx, r, store.ClaimResult{Token: c.token, Attempt: 1})
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return c.legacy(ctx)
	case redis.HasErrorPrefix(err, "OOM"):
		return c.full(ctx, err)
	}
	return c.failed(ctx, true, err)
}

// won returns res, the claim r made, once acknowledged by enough replicas
// when that is asked for; otherwise it releases it and fails.
func (c claim) won(ctx context.Context, r *request, res store.ClaimResult) (store.ClaimResult, error) {
	if r.wait {
		if err := c.s.acked(r); err != nil {
			return c.failed(ctx, true, err)
		}
	}
	return res, nil
}

// found reads the entry the claim found. An entry in flight under this
// very token is this claim, resent by go-redis after losing the first
// reply: the claim is won. A kept entry of another claim is in flight or
// abandoned depending on its PTTL, which keptClaimScript reads.
func (c claim) found(ctx context.Context, v string) (store.ClaimResult, error) {
	d, err := decodeEntry(v)
	if err != nil {
		return store.ClaimResult{}, err
	}
	switch {
	case d.token == c.token && d.entry.State == store.StateInFlight:
		return c.resent(ctx, d.attempt)
	case d.kept():
		return c.kept(ctx)
	}
	return store.ClaimResult{Existing: d.entry}, nil
}

// resent returns the claim found under this claim's own token, as the
// given attempt. With [WithMinReplicas], the WAIT that followed the
// resend does not speak for the first send, which made the write, maybe
// on another connection; an extension of the lease, a write followed by
// its own WAIT, does.
func (c claim) resent(ctx context.Context, attempt int) (store.ClaimResult, error) {
	res := store.ClaimResult{Token: c.token, Attempt: attempt}
	if c.s.minReplicas == 0 {
		return res, nil
	}
	r := newScriptRequest(ctx, extendScript, c.rkey, true, c.token, c.lease)
	if _, err := c.s.runFenced(r); err != nil {
		// The claim is there, under this token, whether or not the
		// extension went out: release it.
		return c.failed(ctx, true, err)
	}
	return c.won(ctx, r, res)
}

// full answers a claim Redis refused for lack of memory. The refusal says
// nothing about the key, so a GET reads it: an entry there is answered as
// usual (a replay, a duplicate in flight, this claim if an earlier send
// landed before memory ran out); a free key is [store.ErrFull].
func (c claim) full(ctx context.Context, oom error) (store.ClaimResult, error) {
	r := newRequest(ctx, c.rkey, false, "get", c.rkey)
	if _, err := c.s.do(ctx, r); err != nil {
		// An earlier send of the SET may have landed, whether or not the
		// GET went out: release it.
		return c.failed(ctx, true, err)
	}
	v, err := r.cmd.Text()
	switch {
	case err == nil:
		return c.found(ctx, v)
	case errors.Is(err, redis.Nil):
		// Nothing under the key: no claim of this token is there either.
		return store.ClaimResult{}, fmt.Errorf("%w: %w", store.ErrFull, oom)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return c.legacy(ctx)
	}
	return c.failed(ctx, true, err)
}

// legacy claims a key that holds a value of another type than a string,
// with legacyClaimScript: a layout 1 entry is read as such.
func (c claim) legacy(ctx context.Context) (store.ClaimResult, error) {
	c.legacyRead = true
	r := newScriptRequest(ctx, legacyClaimScript, c.rkey, c.s.minReplicas > 0, c.value, c.ms)
	if wasSent, err := c.s.do(ctx, r); err != nil {
		return c.notDone(ctx, r, wasSent, err)
	}
	reply, err := r.cmd.Result()
	switch {
	case redis.HasErrorPrefix(err, "OOM"):
		// The script's SET of a free key was refused, its first write.
		// The release after it costs a round trip, on a path that only a
		// key changing type under a full Redis takes, and covers an
		// earlier send of this claim that go-redis resent.
		return c.failed(ctx, true, fmt.Errorf("%w: %w", store.ErrFull, err))
	case err != nil:
		return c.failed(ctx, true, err)
	}
	res, err := decodeLegacyClaimReply(reply)
	switch {
	case err != nil:
		return store.ClaimResult{}, err
	case res.won:
		return c.won(ctx, r, store.ClaimResult{Token: c.token, Attempt: 1})
	case res.found:
		return c.found(ctx, res.value)
	}
	return store.ClaimResult{Existing: res.entry}, nil
}

// failed returns err, after releasing the claim when it was sent and may
// have landed (or is known to be there).
func (c claim) failed(ctx context.Context, wasSent bool, err error) (store.ClaimResult, error) {
	if wasSent {
		c.s.releaseFailedClaim(ctx, c.rkey, c.token)
	}
	return store.ClaimResult{}, err
}

// notDone returns err, the error of [Store.do] for r, a request that makes
// the claim (the SET, or the legacy claim script). When r went out in a
// batch and its caller's context then ended, r is still on its way:
// go-redis may be sending it, or resending it after a broken connection,
// and it may land after Claim has returned. Its release then waits for
// r's round trip, in a goroutine of its own, so that it never runs before
// the claim it undoes (and the caller does not wait for a round trip it
// has left).
func (c claim) notDone(ctx context.Context, r *request, wasSent bool, err error) (store.ClaimResult, error) {
	if wasSent {
		r.afterRoundTrip(func() { c.s.releaseFailedClaim(ctx, c.rkey, c.token) })
	}
	return store.ClaimResult{}, err
}

// failedClaimReleaseTimeout bounds the release that follows a failed
// claim, retries included.
const failedClaimReleaseTimeout = 500 * time.Millisecond

// releaseFailedClaim deletes the claim token may have made although the
// claim failed. Any failure after the first send may hide a claim that
// landed: a reply lost to a cut connection or a timeout, or a reply lost
// and then a resend by go-redis that failed in turn (a dial error, or an
// error reply such as LOADING, READONLY or MASTERDOWN from a server that
// never saw the first send). The caller is told the claim failed, so a
// claim that did land would block the key for a whole lease with no
// handler running. The release is fenced by the token, fresh and random,
// so it can only delete this caller's own claim, and releasing a key that
// holds nothing of ours changes nothing. A claim that took an abandoned
// entry over is not deleted but abandoned again, under its token
// (undoClaimScript): the entry still tells the next claim that an earlier
// attempt may have run. Best effort: errors are ignored.
func (s *Store) releaseFailedClaim(ctx context.Context, rkey, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failedClaimReleaseTimeout)
	defer cancel()
	_, _ = s.do(ctx, newScriptRequest(ctx, undoClaimScript, rkey, false, token))
}

// Abandon implements [store.Store.Abandon] with one script on the key
// (abandonScript): a kept entry in flight is left to expire after its
// Keep, and is abandoned from now on; an entry claimed without Keep is
// deleted. When the key holds a value that is not an entry, the error
// matches both [store.ErrLeaseLost] and [store.ErrCorrupt].
func (s *Store) Abandon(ctx context.Context, key, token string) error {
	if err := s.noClaimHas("abandon", key, token); err != nil {
		return err
	}
	return s.fenced(ctx, "abandon", abandonScript, key, token, false)
}
