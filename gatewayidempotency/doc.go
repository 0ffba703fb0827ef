// Package gatewayidempotency gives the calls that grpc-gateway v2 turns
// from JSON over HTTP into gRPC the same guarantees as gRPC clients get,
// spoken the way HTTP clients speak them: the IETF Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header). Plain net/http handlers get
// the same from [httpidempotency], whose key parsing ([httpidempotency.ParseKey])
// and error mapping this package uses.
//
// It is a package of its own so that the core package imports no gateway
// library. Its name pairs the ecosystem it adapts to with this library's,
// as otelidempotency does.
//
// [ServeMuxOptions] returns the runtime.ServeMuxOptions that do it:
//
//	mux := runtime.NewServeMux(gatewayidempotency.ServeMuxOptions()...)
//	err := paymentsv1.RegisterPaymentsHandler(ctx, mux, conn)
//
// The gRPC server behind the gateway runs [idempotency.UnaryServerInterceptor]
// as usual; nothing changes there.
//
// # Requests
//
// The Idempotency-Key header becomes the server's metadata key
// ([idempotency.MetadataKey], or the name given to [WithMetadataKey] to
// match a server built with [idempotency.WithMetadataKey]). The draft sends
// the key as a Structured Field string, "8e03978e-40d5-43e8-bc93-6894a57f9324"
// in double quotes; clients such as Stripe's send a bare token. Both forms
// reach the server as the same key. Every header line is passed on, so two
// keys are refused as invalid, as over gRPC.
//
// A key that [idempotency.ValidateKey] refuses (empty, longer than
// [idempotency.MaxKeyLen] bytes, or with a byte outside printable ASCII,
// whether bare or inside the quotes) is refused by the gateway itself, on
// every route, before any gRPC call, with the same 400 problem the server
// would answer: gRPC metadata cannot carry non-ASCII or control bytes, and
// grpc-go would fail the call on the client side.
//
// # Responses
//
// A response that the server replayed from its store carries
// Idempotent-Replayed: true, on success and on a replayed error. The body
// is the same JSON: the server replays the same bytes and the gateway
// marshals them the same way. The server's own marker
// ([idempotency.ReplayedKey]) is not forwarded beside it as a
// Grpc-Metadata- header or Grpc-Trailer- trailer; the handler's header and
// trailer metadata are, as the mux's outgoing matchers say
// ([WithOutgoingHeaderMatcher], [WithOutgoingTrailerMatcher]).
//
// # Errors
//
// The interceptor's errors are told apart by their google.rpc.ErrorInfo
// reason in [idempotency.ErrorDomain] and answered with the statuses of
// [httpidempotency.StatusOf], the one mapping that plain net/http answers
// share (the IETF draft's statuses for the reasons it names):
//
//	reason                               HTTP status                 Retry-After
//	IDEMPOTENCY_KEY_MISSING              400 Bad Request
//	IDEMPOTENCY_KEY_INVALID              400 Bad Request
//	IDEMPOTENCY_KEY_IN_USE               409 Conflict                the server's RetryInfo
//	IDEMPOTENCY_KEY_REUSED               422 Unprocessable Entity
//	IDEMPOTENCY_STORE_UNAVAILABLE        503 Service Unavailable     the server's RetryInfo
//	IDEMPOTENCY_STORE_FULL               503 Service Unavailable     the server's RetryInfo
//	IDEMPOTENCY_RESPONSE_NOT_RETAINED    400 Bad Request
//	IDEMPOTENCY_RECORD_CORRUPT           500 Internal Server Error
//	IDEMPOTENCY_METHOD_MISCONFIGURED     500 Internal Server Error
//	IDEMPOTENCY_OUTCOME_UNKNOWN          423 Locked
//
// A 409 or 503 whose status carries no RetryInfo gets [WithRetryAfter]'s
// Retry-After, 1s by default. A full store is answered 503, not 429: 429
// tells one client that it sent too much, while a full store is the
// service's own condition, which every client meets alike and which the
// service's operators must see among its 5xx answers. Both are retried by
// clients that honour Retry-After.
//
// Their body is an RFC 9457 problem (application/problem+json,
// [ProblemType]) that names the reason:
//
//	{
//	  "type": "https://pkg.go.dev/github.com/grpc-idempotency/idempotency/httpidempotency#ProblemType",
//	  "title": "Conflict",
//	  "status": 409,
//	  "detail": "a request with this idempotency key is in progress; retry with the same key",
//	  "reason": "IDEMPOTENCY_KEY_IN_USE"
//	}
//
// A key whose claim was abandoned (its server died or hung mid-handler)
// and that the method's [idempotency.AbandonPolicy] blocks is answered 423
// Locked, without Retry-After, with a problem type of its own,
// [ProblemTypeOutcomeUnknown]: no retry helps until an operator resolves
// the key, and a new key could run the work twice. A method's
// AbandonRecover answers with the recovered response, as any other.
//
// Every other error, the handler's own included, keeps grpc-gateway's
// mapping: runtime.DefaultHTTPErrorHandler, or the handler given to
// [WithErrorHandler].
package gatewayidempotency
