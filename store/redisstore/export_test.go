package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// Parsers exposed to the black-box fuzz tests.
var (
	DecodeValue            = decodeValue
	EncodeInFlight         = encodeInFlight
	DecodeLegacyClaimReply = decodeLegacyClaimReply
	DecodeFencedReply      = decodeFencedReply
	EncodeKept             = encodeKept
)

// DecodeKept reads a layout 2 entry as the store does, with the Keep (in
// milliseconds, 0 unless kept) and attempt count of a kept one.
func DecodeKept(v string) (e store.Entry, token string, keep int64, attempt int, err error) {
	d, err := decodeEntry(v)
	return d.entry, d.token, d.keep, d.attempt, err
}

// LegacyClaim is what DecodeLegacyClaimReply returns, for the fuzz test.
type LegacyClaim = legacyClaim

// Won, Found, Value and Entry expose the fields of a LegacyClaim.
func (l LegacyClaim) Won() bool          { return l.won }
func (l LegacyClaim) Found() bool        { return l.found }
func (l LegacyClaim) Value() string      { return l.value }
func (l LegacyClaim) Entry() store.Entry { return l.entry }

// ClaimWithToken is Claim with a token chosen by the test, to resend a
// claim as go-redis does after losing its reply.
func (s *Store) ClaimWithToken(ctx context.Context, key, token string, fingerprint []byte, lease time.Duration) (store.ClaimResult, error) {
	ms, err := millis("lease", lease)
	if err != nil {
		return store.ClaimResult{}, err
	}
	cl := newClaim(s, s.prefix+key, token, fingerprint, ms, 0, false)
	c, err := cl.run(ctx)
	if err != nil {
		return store.ClaimResult{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	return c, nil
}

// MaxLanes is how many batches a batcher keeps on the wire at most.
const MaxLanes = maxLanes

// SetBatchHooks sets a hook on the batcher of s (a Store on a single
// node, pipelining on), before its first call: queued is called with the
// key of each call that joins the queue.
func (s *Store) SetBatchHooks(queued func(key string)) {
	s.batch.hooks = batcherHooks{queued: queued}
}

// SetStallAfter sets how long the batches on the wire of s's batcher must
// have taken before arriving calls open more lanes: a negative d opens
// them at once (up to MaxLanes), math.MaxInt64 never.
func (s *Store) SetStallAfter(d time.Duration) {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	s.batch.stallAfter = d
}

// DecodeListEntry reads one entry of a reply of the list script, for the
// fuzz test.
var DecodeListEntry = decodeListEntry

// CursorMaster returns the address of the master a cursor of List names.
func CursorMaster(cursor string) (string, error) {
	c, err := parseListCursor(cursor)
	return c.addr, err
}

// DecodeKeptClaimReply reads a reply of the kept claim script, for the
// fuzz test: its tag, the attempt of a take-over, and the Keep of the
// kept entry it holds (0 for none).
func DecodeKeptClaimReply(reply any) (tag string, attempt int, keep int64, err error) {
	k, err := decodeKeptClaimReply(reply)
	return k.tag, k.attempt, k.d.keep, err
}

// PurgeScriptSHA is the SHA1 of the script Purge runs, for tests that
// find its command on the wire.
var PurgeScriptSHA = purgeScript.sha

// SetPurgeMarkTTL sets how long the mark of each purge of s lives, before
// its first call.
func (s *Store) SetPurgeMarkTTL(d time.Duration) { s.markTTL = d }

// MarkKey is the key of the mark of a purge of rkey, a key of the store
// with prefix, with a nonce.
var MarkKey = markKey
