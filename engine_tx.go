package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
)

// ErrNoClaim is returned by [NewTxOutcome] when the context carries no
// claim: the call is not deduplicated (no key, method disabled, failing
// open), or the context is not a handler's.
var ErrNoClaim = errors.New("idempotency: the context carries no claim")

// TxOutcome is the outcome of the call a handler runs under, encoded
// exactly as the interceptor would store it, for a store that shares a
// database with the handler's side effects to write inside the handler's
// own transaction. Then "the side effect happened" and "the answer is
// recorded" commit together or not at all.
//
// The protocol, which any store with transactions can implement (as
// postgresstore's CompleteTx does):
//
//  1. The handler builds the outcome with [NewTxOutcome] inside its
//     transaction, after its side effects.
//  2. The store writes Data under StoreKey in the same transaction, fenced by
//     Token: the write succeeds only while Token owns the in-flight entry,
//     and otherwise reports [store.ErrLeaseLost] so the handler rolls back.
//  3. On success the store calls [TxOutcome.Recorded].
//  4. The handler commits, and then returns the response it recorded (or
//     the error). When the commit fails it returns a retryable error
//     (UNAVAILABLE, INTERNAL, ...).
//
// A handler that retries its transaction builds a new TxOutcome in each
// attempt: a new one forgets that an earlier, rolled-back attempt was
// recorded, so an attempt that commits without recording is stored by the
// interceptor as usual.
//
// After the handler returns, the interceptor makes no store call for an
// outcome a transaction recorded. If the handler returns a retryable error
// instead, the interceptor releases the claim, fenced by its token: that
// frees the key when the transaction rolled back, and leaves the record in
// place when it committed after all (a release never removes a completed
// entry), so an ambiguous commit never leads to a second execution.
type TxOutcome struct {
	// StoreKey is the store key of the call (see [Claim.StoreKey]).
	StoreKey string
	// Token is the owner token the write must be fenced by.
	Token string
	// Data is the encoded outcome record; the caller owns it.
	Data []byte
	// Retention is how long the completed record is kept.
	Retention time.Duration

	c *call
}

// NewTxOutcome encodes the outcome of the call whose claim ctx carries: resp
// when herr is nil, else the deterministic error herr, which must be a gRPC
// status whose code the interceptor stores ([WithStoredCodes]); the headers
// and trailers the handler has set so far are part of it. An outcome larger
// than the limit ([WithMaxResponseBytes]) is encoded as a not-retained
// record, as the interceptor would. It returns [ErrNoClaim] when ctx
// carries no claim.
//
// A server-streaming call's outcome is the stream its handler sends, which
// the interceptor records and stores once the handler returns: it cannot
// be recorded inside the handler's transaction, and NewTxOutcome refuses
// it with an error that says so, before anything is written; the handler
// then rolls back, or commits without a record and returns, and the
// interceptor stores the stream. A client-streaming call has one response,
// recorded as a unary call's is.
func NewTxOutcome(ctx context.Context, resp proto.Message, herr error) (*TxOutcome, error) {
	c, ok := ctx.Value(claimKey{}).(*call)
	if !ok {
		return nil, ErrNoClaim
	}
	if err := c.t.txRefused(); err != nil {
		return nil, err
	}
	if herr != nil && !c.e.keeps(herr) {
		return nil, fmt.Errorf("idempotency: %v is not a stored error: return it so the claim is released", herr)
	}
	if herr == nil && resp == nil {
		return nil, errors.New("idempotency: a transactional outcome needs a response or an error")
	}
	c.txRecorded.Store(false) // an earlier attempt's transaction rolled back
	data := c.e.outcome(ctx, c, resp, herr)
	defer putBuffer(data)
	return &TxOutcome{
		StoreKey:  c.key,
		Token:     c.claim.Token,
		Data:      append([]byte(nil), *data...),
		Retention: c.cfg.retention,
		c:         c,
	}, nil
}

// Recorded tells the interceptor that the store wrote o inside the
// handler's transaction, fenced by its token. Once the handler returns the
// response or stored error it recorded, the interceptor makes no further
// store call for the call; when it returns a retryable error, the claim is
// released, which leaves a committed record in place.
func (o *TxOutcome) Recorded() {
	o.c.txRecorded.Store(true)
}
