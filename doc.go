// Package idempotency makes unary gRPC calls safe to retry.
package idempotency
