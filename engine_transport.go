package idempotency

import (
	"context"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// transport is an entry point's side of a call: the one seam between the
// protocol ([engine]) and the way the work reaches it and its answer
// leaves. Each transport owns the shape of its outcome: what its work
// returns, what the record holds of it, and how a replay delivers it.
//
// The engine owns what every call shares: the key, the fingerprint, the
// claim, its lease and how it is settled (completed or released); the
// fields every record holds (version, state, fingerprint, timestamps),
// the size bound and the not-retained fallback (decision 30), the
// record's encoding and decoding; the replay cache and the observer's
// events. It passes a transport what it needs, and never looks inside an
// answer.
//
// The transports, a file each:
//
//   - [unaryCall] (server_unary.go): a unary gRPC handler; one response
//     or a stored error, with the header and trailer it set.
//   - [streamCall] (server_stream_call.go): a client-streaming handler,
//     whose one response is stored as a unary one's, or a
//     server-streaming one, whose messages and final status are.
//   - [fnCall] (server_do.go): the function of [Do] and [Once]; one
//     response or a stored error, nothing else.
//
// What several of them share is a file each, which they call: [reply]
// (server_response.go) records and replays one response message or a
// stored error and converts a status to and from its record form;
// [captureStream] (server_capture.go) captures a gRPC handler's
// header and trailer, which a replay sets with the replay marker. So what
// a replay carries changes in the record (record.proto, under
// internal/proto) and in the one file that fills and reads it.
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
	// record fills in rec, which holds what every record holds, with the
	// outcome of a run that returned resp and herr (nil, or an error the
	// engine keeps): its Outcome and the fields that outcome uses. It
	// returns their size, which the engine holds to the size bound, and
	// an error when the outcome cannot be kept (the engine then stores it
	// as not retained). It may encode into buf, which the engine pools
	// and takes back once rec is encoded.
	record(rec *recordv1.Record, resp any, herr error, buf *[]byte) (size int, err error)
	// replay answers from rec, a completed record of the call's
	// fingerprint: it delivers what the answer carries besides the result
	// (a gRPC handler's header and trailer, with the replay marker) and
	// returns the result, which the engine returns as the work's. A record
	// the call cannot replay (another kind of outcome, a response that
	// does not decode) is an error wrapping [ErrRecordCorrupt], and
	// nothing is delivered.
	replay(ctx context.Context, rec *recordv1.Record) (any, error)
	// txRefused returns why the work's own transaction cannot record its
	// outcome ([NewTxOutcome]), or nil when it can.
	txRefused() error
	// request returns the call's one request, which a [RecoverFunc] is
	// given; nil for a stream, which cannot be recovered (decision 295).
	request() proto.Message
	// recovered returns msg, the response a [RecoverFunc] found, as the
	// work's result, or an error wrapping [ErrMisconfigured] when it is
	// not of the call's response type.
	recovered(msg proto.Message) (any, error)
}
