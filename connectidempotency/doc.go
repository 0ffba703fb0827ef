// Package connectidempotency makes connect-go (connectrpc.com/connect)
// services and clients safe to retry: a handler interceptor that runs each
// keyed call of a unary, client-streaming or server-streaming procedure
// once per key, across every process that shares the store, and replays
// its stored answer to every retry; and a client interceptor that gives
// each call one key and retries it with that key. Both serve the Connect,
// gRPC and gRPC-Web protocols, over HTTP/1.1 and HTTP/2.
//
// # Server
//
// [NewInterceptor] takes the [idempotency.Server] a grpc-go service would
// use, with its store and options, and goes on the handlers:
//
//	srv := idempotency.NewServer(store)
//	path, handler := paymentsv1connect.NewPaymentsHandler(svc,
//		connect.WithInterceptors(connectidempotency.NewInterceptor(srv)))
//
// A call's key is its idempotency-key header ([idempotency.MetadataKey],
// or the server's [idempotency.WithMetadataKey]), else the request field
// its key_field names. A procedure's policy is its idempotency.v1.method
// option, [idempotency.WithMethodPolicy] or [idempotency.WithDefaultMode],
// read from the server's descriptors (those linked in, where connect-go's
// Spec().Schema comes from, or [idempotency.WithDescriptors]); a procedure
// whose connect-go IdempotencyLevel is NO_SIDE_EFFECTS is never keyed, one
// that is IDEMPOTENT is keyed as an unannotated one. Bidirectional streams
// pass through (an option on one fails its calls closed).
//
// A run's answer reaches the caller as the handler gave it. A retry gets
// the stored answer: the same response message, the headers the handler
// set (on the response and on the call's context) and its trailers; or
// its error's code, message, details and metadata; with the replay marker
// in the header of a response, and in the metadata of an error ([Replayed]
// reads it): [ReplayedHeader] (Idempotent-Replayed: true) on the Connect
// protocol, as httpidempotency's answers carry it, and the gRPC metadata
// [idempotency.ReplayedKey] on gRPC and gRPC-Web. The library's refusals
// are *connect.Errors of the gRPC interceptors' codes, with the same
// google.rpc.ErrorInfo (and RetryInfo, with Grpc-Retry-Pushback-Ms in the
// error's metadata, when a retry is to wait).
//
// A server stream's messages reach the caller as the handler sends them,
// and are recorded; a retry gets them all, or those after its
// idempotency-resume-after ([idempotency.ResumeAfterKey]). A caller that
// leaves does not stop the handler, whose whole stream a retry gets. A
// message connect-go refuses (over WithSendMaxBytes, or one that does not
// encode) ends the stream with connect-go's error, as grpc-go's refusal
// does. A client stream's requests are read ahead and fingerprinted in
// order, and its response is stored as a unary one is. The header goes
// with a stream's first message: the handler's changes to it after are
// not sent, nor recorded.
//
// # Client
//
// [NewClientInterceptor] takes the gRPC client interceptors' options
// ([idempotency.WithMaxAttempts], [idempotency.WithBackoff] and the
// others) and goes on the client. A call gets one key, for all its
// attempts: the one its context carries ([idempotency.ContextWithKey]) or
// its request header sets, else its key_field, else a fresh one. It is
// retried on UNAVAILABLE (a connection that failed included: connect-go
// reports it in its own words), on [idempotency.ErrKeyInUse] and
// [idempotency.ErrStoreFull], with the same backoff and pushback cap as a
// grpc-go call. A cut server stream resumes after the messages received;
// a client stream is sent again from the copies held. An error that
// carries the library's ErrorInfo unwraps to its sentinel:
// errors.Is(err, idempotency.ErrKeyReused) holds on the *connect.Error.
//
// # How it works
//
// The interceptors are the root package's gRPC interceptors: each
// connect-go call goes through them as a grpc-go call. Its headers are the
// call's metadata (lower-cased names, binary "-bin" values decoded), its
// conn is a grpc.ServerStream or grpc.ClientStream, and the header and
// trailer the interceptors set travel through a grpc.ServerTransportStream
// of the call's. So a procedure's policy, key, fingerprint, store key,
// record and replay cache are those of the same method served by grpc-go:
// a service that moves from grpc-go to connect-go, or serves both over
// one store during the move, keeps its keys, and a call answered by one is
// replayed by the other. The behaviour the library promises is one code
// path, whatever the framework; this package converts what connect-go
// says into grpc-go's terms and back (the reasoning is in decisions 200 to
// 209 of docs/semantics/connect.md).
//
// # Interceptors outside this one
//
// A *connect.Response is generic in its message's Go type, which an
// interceptor does not know, so a replayed response holds its message (of
// the procedure's response type, encoded by connect-go's codecs as a
// live one) in a value of another Go type: an interceptor outside this one
// that reads a response message as a proto.Message sees the same message,
// one that asserts its generated type does not. Place this interceptor
// outside those, inside the ones that authenticate the caller (the scope,
// [idempotency.WithScope], reads what they put in the context). Handlers
// and interceptors inside it never see a replay.
//
// The guide is docs/connect.md in the repository.
package connectidempotency
