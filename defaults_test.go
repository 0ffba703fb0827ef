package idempotency_test

import "time"

// The defaults and bounds the options' doc comments state, which the
// package does not export.
const (
	defaultMaxAttempts          = 5       // WithMaxAttempts
	defaultMaxStreamRetryBuffer = 1 << 20 // WithMaxStreamRetryBuffer
	defaultLease                = 60 * time.Second
	minLease                    = 100 * time.Millisecond
	maxLease                    = 24 * time.Hour
	defaultRetention            = 24 * time.Hour
	maxRetention                = 87600 * time.Hour
	defaultHandlerTimeout       = time.Minute
)
