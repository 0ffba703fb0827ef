package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
)

// kept is the second round trip of a claim whose SET found a kept entry
// of another claim: keptClaimScript reads the key again and, from its
// PTTL, answers it in flight or abandoned, or takes an abandoned entry
// with the claim's fingerprint over when the claim asks to. Like the SET,
// the script may claim the key (a key found free by now, or a take-over),
// so a failure after it was sent releases the claim's token.
func (c claim) kept(ctx context.Context) (store.ClaimResult, error) {
	takeOver := "0"
	if c.takeOver {
		takeOver = "1"
	}
	r := newScriptRequest(ctx, keptClaimScript, c.rkey, c.s.minReplicas > 0,
		c.token, c.value, c.ms, c.fingerprint, takeOver, c.lease)
	if wasSent, err := c.s.do(ctx, r); err != nil {
		return c.notDone(ctx, r, wasSent, err)
	}
	reply, err := r.cmd.Result()
	switch {
	case redis.HasErrorPrefix(err, "OOM"):
		// The script's write (a claim of a key found free, or a
		// take-over) was refused: see legacy.
		return c.failed(ctx, true, fmt.Errorf("%w: %w", store.ErrFull, err))
	case err != nil:
		return c.failed(ctx, true, err)
	}
	k, err := decodeKeptClaimReply(reply)
	if err != nil {
		return store.ClaimResult{}, err
	}
	switch k.tag {
	case "new":
		return c.won(ctx, r, store.ClaimResult{Token: c.token, Attempt: 1})
	case "took":
		prev, _ := store.TokenTime(k.old)
		return c.won(ctx, r, store.ClaimResult{Token: c.token, Attempt: k.attempt, Previous: prev})
	case "mine":
		return c.resent(ctx, k.d.attempt)
	case "inflight", "abandoned":
		e := k.d.entry
		if k.tag == "abandoned" {
			e.State = store.StateAbandoned
		}
		return store.ClaimResult{Existing: e}, nil
	case "value":
		return c.found(ctx, k.value)
	}
	// "other": no longer a layout 2 entry.
	if c.legacyRead {
		return store.ClaimResult{}, corrupt("key changed type while claimed")
	}
	return c.legacy(ctx)
}

// keptClaim is a reply of keptClaimScript.
type keptClaim struct {
	tag     string  // "new", "took", "mine", "inflight", "abandoned", "value" or "other"
	old     string  // "took": the token of the attempt taken over
	attempt int     // "took": the attempt of the take-over
	value   string  // "value": the layout 2 entry found, to decode
	d       decoded // "mine", "inflight", "abandoned": the kept entry found
}

// decodeKeptClaimReply reads a reply of keptClaimScript. Any reply it
// cannot read, down to a kept entry that is not well formed, gives an
// error wrapping [store.ErrCorrupt].
func decodeKeptClaimReply(reply any) (keptClaim, error) {
	arr, _ := reply.([]any)
	if len(arr) == 0 {
		return keptClaim{}, corrupt("unexpected claim reply %s", describe(reply))
	}
	k := keptClaim{}
	k.tag, _ = arr[0].(string)
	switch {
	case (k.tag == "new" || k.tag == "other") && len(arr) == 1:
		return k, nil
	case k.tag == "took" && len(arr) == 3:
		old, ok1 := arr[1].(string)
		n, ok2 := arr[2].(int64)
		if ok1 && ok2 && n > 1 {
			k.old, k.attempt = old, int(n)
			return k, nil
		}
	case k.tag == "value" && len(arr) == 2:
		if v, ok := arr[1].(string); ok {
			k.value = v
			return k, nil
		}
	case (k.tag == "mine" || k.tag == "inflight" || k.tag == "abandoned") && len(arr) == 2:
		v, _ := arr[1].(string)
		d, err := decodeEntry(v)
		if err != nil {
			return keptClaim{}, err
		}
		if !d.kept() {
			return keptClaim{}, corrupt("claim reply %q holds an entry that is not kept", k.tag)
		}
		k.d = d
		return k, nil
	}
	return keptClaim{}, corrupt("unexpected claim reply %s", describe(reply))
}
