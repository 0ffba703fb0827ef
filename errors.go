package idempotency

// ErrorDomain is the google.rpc.ErrorInfo domain of every error the
// interceptors return.
const ErrorDomain = "idempotency.grpc"

// ErrorInfo reasons. Clients branch on these, never on message text.
const (
	// ReasonKeyMissing: a REQUIRED method was called without a key
	// (INVALID_ARGUMENT, not retryable).
	ReasonKeyMissing = "IDEMPOTENCY_KEY_MISSING"
	// ReasonKeyInvalid: the key is empty, longer than 255 bytes, outside
	// printable ASCII, or sent more than once (INVALID_ARGUMENT, not retryable).
	ReasonKeyInvalid = "IDEMPOTENCY_KEY_INVALID"
	// ReasonKeyReused: the key was used with a different request
	// (FAILED_PRECONDITION, never retryable).
	ReasonKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// ReasonKeyInUse: a call with the same key is in flight (ABORTED,
	// retryable with the same key after the RetryInfo delay).
	ReasonKeyInUse = "IDEMPOTENCY_KEY_IN_USE"
	// ReasonStoreUnavailable: the store could not be reached (UNAVAILABLE,
	// retryable).
	ReasonStoreUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE"
	// ReasonRecordCorrupt: the stored record could not be read (INTERNAL,
	// not retryable).
	ReasonRecordCorrupt = "IDEMPOTENCY_RECORD_CORRUPT"
	// ReasonResponseNotRetained: the original response was larger than the
	// retention limit, so it cannot be replayed (FAILED_PRECONDITION, not
	// retryable; the call did run).
	ReasonResponseNotRetained = "IDEMPOTENCY_RESPONSE_NOT_RETAINED"
	// ReasonStoreFull: a bounded store has no room for a new key
	// (RESOURCE_EXHAUSTED, retryable later).
	ReasonStoreFull = "IDEMPOTENCY_STORE_FULL"
)
