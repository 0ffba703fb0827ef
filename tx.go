package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
)

// TxOutcome is the outcome of the call a handler runs under, encoded
// exactly as the interceptor would store it, for a store that shares a
// database with the handler's side effects (postgresstore's CompleteTx):
// the handler builds it with [NewTxOutcome] after its side effects; the
// store writes Data under StoreKey in the handler's transaction, fenced by
// Token (else it reports [store.ErrLeaseLost] and the handler rolls back),
// and calls [TxOutcome.Recorded]; the handler commits and returns what it
// recorded, or a retryable error when the commit fails. What the
// interceptor then does is in [the behaviour contract].
//
// [the behaviour contract]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/semantics/stores.md#decision-37
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
