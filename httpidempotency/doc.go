// Package httpidempotency gives plain net/http handlers and webhook
// receivers the library's promise, a handler runs once per key, spoken the
// way HTTP clients speak it: the IETF Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header).
//
// [Middleware] wraps any http.Handler; it needs the standard library and
// the core module only, and shares the store, scope and limits of an
// [idempotency.Server] with the gRPC interceptor:
//
//	srv := idempotency.NewServer(store)
//	idem := httpidempotency.Middleware(srv)
//	mux := http.NewServeMux()
//	mux.Handle("POST /orders", idem(createOrder)) // after routing
//	http.ListenAndServe(addr, mux)
//
// It is built on [idempotency.Do]: one protocol for every entry point.
//
// # Requests
//
// The key comes from the Idempotency-Key header ([WithKeyHeader] names
// another, such as Standard Webhooks' webhook-id), as a bare token or a
// Structured Field string ([ParseKey]). It applies to POST and PATCH
// ([WithMethods]); a request without a key passes through unless
// [WithKeyRequired]. Keys live in one operation per middleware
// ([WithOperation], "http"), so one key sent to two endpoints is a reused
// key. The fingerprint covers the method, the path and query and the body
// ([WithFingerprint]); the body is read in full, up to
// [WithMaxRequestBytes].
//
// # Responses
//
// The handler's response goes to the client as it writes it, and a copy
// is stored when its status is kept ([WithKeptStatuses]; [DefaultKeep]:
// below 500 except 307, 308, 401, 403, 404, 405, 408, 425 and 429, so
// place the middleware after routing and authentication). The copy holds the
// headers the handler set, not those of the layers in front, and the
// whole body, even when the client left before the handler wrote it. A
// retry gets the stored status, headers and body byte for byte, with
// Idempotent-Replayed: true, beside the headers its own layers in front
// set; a live answer never carries that header. A response that cannot
// be replayed whole (a body longer than [WithMaxResponseBytes], one
// streamed with Flush, hijacked, or with trailers) completes its key as
// not retained: a retry gets a problem saying so, never a truncated copy.
//
// # Errors
//
// Refusals are RFC 9457 problems (application/problem+json, [ProblemType])
// naming the reason; [StatusOf] is the one mapping of the library's errors
// to HTTP statuses, which gatewayidempotency shares:
//
//	{
//	  "type": "https://pkg.go.dev/github.com/grpc-idempotency/idempotency/httpidempotency#ProblemType",
//	  "title": "Conflict",
//	  "status": 409,
//	  "detail": "a request with this idempotency key is in progress; retry with the same key",
//	  "reason": "IDEMPOTENCY_KEY_IN_USE"
//	}
//
// A full store is answered 503, not 429: 429 tells one client that it sent
// too much, while a full store is the service's own condition, which every
// client meets alike and which its operators must see among its 5xx
// answers.
//
// # Client
//
// [Transport] is the client side, an http.RoundTripper with the gRPC
// client interceptor's rules: each POST or PATCH gets one key (the
// caller's header, [ContextWithKey], or a minted UUIDv4) and is retried
// with it when its answer was lost, when it got 409 in flight or 503,
// honouring Retry-After:
//
//	client := &http.Client{Transport: httpidempotency.Transport(nil)}
//
// [WithKeyHeader] and [WithMethods] are [SharedOption]s: give the
// middleware and its clients the same ones.
package httpidempotency
