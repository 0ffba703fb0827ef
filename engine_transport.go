package idempotency

import (
	"context"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// transport is an entry point's side of a call: the one seam between the
// protocol ([engine]) and the way the work reaches it. The unary
// interceptor's ([unaryCall]) runs a gRPC handler and carries its header
// and trailer; [Do]'s ([fnCall]) runs a function and carries nothing else.
type transport interface {
	// bypass runs the work without a claim (the store failing open, or an
	// outer claim covering the call).
	bypass(ctx context.Context) (any, error)
	// run runs the work under the claim, on the context capture returned
	// (detached and bounded by then).
	run(ctx context.Context) (any, error)
	// capture returns ctx, the caller's with the claim, set up to record
	// what the work adds to its outcome besides its result.
	capture(ctx context.Context) context.Context
	// recorded returns what capture recorded so far, in record form.
	recorded() (header, trailer []*recordv1.Metadata)
	// replayed delivers what a replayed record holds besides its result.
	replayed(ctx context.Context, rec *recordv1.Record)
}
