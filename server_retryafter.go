package idempotency

import "time"

// RetryAfter returns the delay s asks a client to wait before retrying a
// key in flight or a store that is down or full: [WithRetryAfter], by
// default [DefaultRetryAfter] (1 s). The interceptors send it as
// google.rpc.RetryInfo and grpc-retry-pushback-ms; [Do] returns bare
// sentinels, so an entry point built on it that answers in another
// protocol reads the delay here (httpidempotency sends it as the
// Retry-After header of its 409 and 503 answers).
func (s *Server) RetryAfter() time.Duration { return s.e.cfg.retryAfter }
