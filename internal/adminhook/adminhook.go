// Package adminhook is how package admin reaches what a
// *idempotency.Server gives to it alone, off the public API: the server's
// descriptor registry and the opening of a stored record with its sealing
// keys. Package idempotency sets each function in its init (as grpc-go's
// internal package is set); package idempotency cannot be imported here,
// so the server is passed as any and must be a *idempotency.Server.
package adminhook

import (
	"context"

	"google.golang.org/protobuf/reflect/protoregistry"
)

// Descriptors returns the descriptor registry the server s reads method
// options and decodes stored messages with: idempotency.WithDescriptors,
// by default protoregistry.GlobalFiles.
var Descriptors func(s any) *protoregistry.Files

// OpenRecord returns the encoded record that data, the stored outcome of
// the entry under storeKey, holds for scope (the value of the scope
// function of the callers that made it, idempotency.WithScope), opened
// with the sealing keys of the server s (idempotency.WithSealing), and the
// ID of the key that sealed it: "" for a record written without sealing,
// which it returns as it is. A record that does not open (edited, moved,
// another scope's, sealed by a key the keyring no longer holds, or sealed
// while s has no sealing keys) is an error wrapping
// idempotency.ErrRecordCorrupt, which says why, with the key's ID when the
// record names one; an error finding the scope's keys
// (idempotency.Sealing.TenantKeys) is returned wrapped.
var OpenRecord func(s any, ctx context.Context, storeKey, scope string, data []byte) ([]byte, string, error)
