// Package migratestore moves an idempotency service from one [store.Store]
// to another without losing the keys in flight or the outcomes stored in
// the old one: from one Redis to another, to a new key prefix or a new
// table.
//
// The old store must outlive the servers' processes. The memory store does
// not: a deploy starts new processes with new, empty memory stores, so an
// adapter whose old store is a memory store has nothing to move after a
// restart, and the keys completed before it run again when retried. [The
// operations guide] says what moving off the memory store can keep (a
// drain, or moving the clients instead of the keys).
//
// A [Store] claims every key in the new store first, then in the old one,
// and holds both claims while the handler runs: a key in flight or
// completed in either store is seen, whichever server holds it, and a
// server still on the old store alone sees the claims and outcomes of the
// servers already moved. The new store decides between servers that run
// this adapter; the old one is asked too, so that what it holds is
// answered from it:
//
//   - Claim claims in the new store. When the new store holds an entry,
//     that entry is the answer. Otherwise it claims in the old store; when
//     the old store holds an entry (in flight, or completed before the
//     move), it releases its new claim and returns the old entry, which
//     the interceptor replays or reports as in flight. When both claims
//     are won, the returned token owns both.
//   - Complete stores the outcome in the new store, then in the old one.
//   - Extend and Release act on both.
//
// Any error of either store is returned (errors.Join when both fail), so
// during a move the service needs both stores: it fails closed when
// either is down. A Claim that fails after its claim in the new store was
// won releases that claim first (or, when it took an abandoned entry
// over, abandons it again). A take-over in either store is reported as
// the later of the two stores' attempts.
//
// [The operations guide] gives the procedure: roll this adapter out to every
// server, wait for the longest retention after the last server that used
// the old store alone has stopped, then roll out the new store alone.
//
// A token of the adapter joins the two stores' tokens and is sealed with an
// HMAC under a random key of its Store, so that a token spliced from parts
// of others owns nothing: give a token back only to the Store that issued
// it (the interceptor does).
//
// The adapter is a [store.Inspector] and a [store.Invalidator] when the
// two stores are (its methods fail with an error wrapping
// errors.ErrUnsupported otherwise). Lookup looks in both stores and
// answers as Claim would, from the new store first; List walks the new
// store, then the old one, so a key both hold (every key claimed through
// the adapter) is listed twice; Purge looks at both stores and decides
// from both before it purges the new store, then the old one, so that a
// refused purge changes neither; Stats adds the two stores' figures up, so
// during a move a key claimed through the adapter counts twice;
// Invalidations merges the two stores' subscriptions. Each costs the round
// trips of both stores (a Purge, a lookup and a purge in each).
//
// The adapter does not offer transactional completion (NewTxOutcome,
// CompleteTx): a transaction cannot span two stores. Each operation costs
// the round trips of both stores, and a replay of an outcome stored in the
// old store three (a claim in each, the release of the new claim).
//
// [The operations guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#moving-to-another-store
package migratestore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// releaseTimeout bounds the release of a new claim after the old store
// refused or failed a Claim, when the caller's context is done.
const releaseTimeout = 2 * time.Second

// Store is a [store.Store] that moves keys from an old store to a new one.
// It is safe for concurrent use, as the stores it wraps are.
type Store struct {
	from, to store.Store
	// seal authenticates the tokens this Store makes, so that a token
	// spliced from parts of others owns nothing in either store.
	seal []byte
}

var _ store.Store = (*Store)(nil)

// New returns a Store that moves keys from the store from to the store to.
// The two must be different stores (or different key spaces of one
// backend, such as two Redis key prefixes). New keeps no state of its own:
// closing the stores is the caller's job.
func New(from, to store.Store) *Store {
	seal := make([]byte, 32)
	_, _ = rand.Read(seal) // crypto/rand.Read never fails
	return &Store{from: from, to: to, seal: seal}
}

// Claim claims key in the new store, then in the old one; see the package
// documentation.
func (s *Store) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	newClaim, err := s.to.Claim(ctx, key, fingerprint, lease, opts)
	if err != nil || !newClaim.Won() {
		return newClaim, err
	}
	oldClaim, err := s.from.Claim(ctx, key, fingerprint, lease, opts)
	if err != nil || !oldClaim.Won() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		// A claim that took an abandoned entry over is given back
		// abandoned, not released: released, the key would be free in the
		// new store for a first attempt that knows nothing of the
		// abandoned one.
		undo := s.to.Release
		if newClaim.Attempt > 1 {
			undo = s.to.Abandon
		}
		if rerr := undo(rctx, key, newClaim.Token); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if err != nil {
			return store.ClaimResult{}, err
		}
		return oldClaim, nil
	}
	// The later attempt speaks for the key: a key abandoned by a server on
	// the old store alone is taken over in the old store only (the new
	// store holds nothing of it), and a claim that did not say so would
	// run the handler under AbandonRecover instead of the recovery.
	won := store.ClaimResult{Token: s.joinTokens(newClaim.Token, oldClaim.Token), Attempt: newClaim.Attempt, Previous: newClaim.Previous}
	if oldClaim.Attempt > won.Attempt {
		won.Attempt, won.Previous = oldClaim.Attempt, oldClaim.Previous
	}
	return won, nil
}

// Complete stores data in the new store, then in the old one. A Complete
// repeated after the old store failed completes the old store only: the
// new one answers a repeat from the token that completed it with nil.
//
// token may also be the Token of an [Info] of this Store (Lookup's or
// List's), as an operator resolves an abandoned key with it: each store
// holding an entry it names is completed under that entry's own token,
// and a store it does not name is left alone.
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	if f, ok := parseFence(token); ok {
		return s.completeFenced(ctx, key, f, data, retention)
	}
	newToken, oldToken := s.splitToken(token)
	if err := s.to.Complete(ctx, key, newToken, data, retention); err != nil {
		return err
	}
	return s.from.Complete(ctx, key, oldToken, data, retention)
}

// completeFenced completes key in each store under the token f names for
// it, the new store first; a store whose part names no token is left
// alone, and a fence that names none is refused.
func (s *Store) completeFenced(ctx context.Context, key string, f fence, data []byte, retention time.Duration) error {
	newToken, inNew := strings.CutPrefix(f.newPart, "=")
	oldToken, inOld := strings.CutPrefix(f.oldPart, "=")
	if !inNew && !inOld {
		return store.ErrLeaseLost
	}
	if inNew {
		if err := s.to.Complete(ctx, key, newToken, data, retention); err != nil {
			return err
		}
	}
	if inOld {
		return s.from.Complete(ctx, key, oldToken, data, retention)
	}
	return nil
}

// Release releases key in both stores.
func (s *Store) Release(ctx context.Context, key, token string) error {
	newToken, oldToken := s.splitToken(token)
	return errors.Join(s.to.Release(ctx, key, newToken), s.from.Release(ctx, key, oldToken))
}

// Extend renews the lease of key in both stores.
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	newToken, oldToken := s.splitToken(token)
	return errors.Join(s.to.Extend(ctx, key, newToken, lease), s.from.Extend(ctx, key, oldToken, lease))
}

// joinTokens makes one token of the two stores' tokens: the length of the
// new store's token, a colon, both tokens, a dot and a MAC of what comes
// before it.
func (s *Store) joinTokens(newToken, oldToken string) string {
	body := strconv.Itoa(len(newToken)) + ":" + newToken + oldToken
	return body + "." + s.mac(body)
}

// splitToken undoes joinTokens. A token that this Store did not make owns
// nothing in either store; it is passed to both as it is, so that each
// answers it as the foreign token it is.
func (s *Store) splitToken(token string) (newToken, oldToken string) {
	dot := strings.LastIndexByte(token, '.')
	if dot < 0 || !hmac.Equal([]byte(token[dot+1:]), []byte(s.mac(token[:dot]))) {
		return token, token
	}
	head, rest, _ := strings.Cut(token[:dot], ":")
	n, err := strconv.Atoi(head)
	if err != nil || n <= 0 || n >= len(rest) {
		return token, token
	}
	return rest[:n], rest[n:]
}

// mac is a 128-bit HMAC-SHA256 of body, in base64url.
func (s *Store) mac(body string) string {
	h := hmac.New(sha256.New, s.seal)
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// Abandon ends the lease of key in both stores now, as Extend renews it.
func (s *Store) Abandon(ctx context.Context, key, token string) error {
	newToken, oldToken := s.splitToken(token)
	return errors.Join(s.to.Abandon(ctx, key, newToken), s.from.Abandon(ctx, key, oldToken))
}
