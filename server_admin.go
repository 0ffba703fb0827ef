package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-idempotency/idempotency/internal/adminhook"
	"github.com/grpc-idempotency/idempotency/internal/policy"
	"github.com/grpc-idempotency/idempotency/internal/seal"
	"github.com/grpc-idempotency/idempotency/store"
)

// The operator's side of a Server: what an admin service or a command line
// needs to find a client's key in the store, read it and repair it. None
// of it is on the request path.

// StoreKey returns the store key under which s keeps the outcome of the
// calls of name with the client's key in scope: the key that
// [store.Inspector.Lookup] and [Server.Purge] take. It is the server's own
// derivation, the one its interceptors, [Do] and [Once] use, so it cannot
// drift from them; the encoding is written out in [the operations guide].
//
// name is a full gRPC method name, "/payments.v1.Payments/Charge", whose
// namespace is used when its policy has one ([MethodPolicy.Namespace], its
// proto option's namespace, resolved as the interceptors resolve it), or,
// for anything that does not start with "/", an operation of [Do] and
// [Once] or a namespace: those never start with "/" ([ValidateOperation]),
// so a name is never both. scope is what the server's [WithScope] function
// returns for the caller, "" when it has none. It returns an error for an
// empty name, and the [*KeyError] of [ValidateKey] for a key the server
// would refuse (which never echoes the key).
//
// [the operations guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#the-store-key
func (s *Server) StoreKey(name, scope, key string) (string, error) {
	if name == "" {
		return "", errors.New("idempotency: StoreKey needs a method or an operation name")
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if name[0] != '/' {
		return storeKey(kindNamespace, name, scope, key), nil
	}
	if ns := s.e.namespaceOf(name); ns != "" {
		return storeKey(kindNamespace, ns, scope, key), nil
	}
	return storeKey(kindMethod, name, scope, key), nil
}

// namespaceOf returns the namespace of fullMethod's policy, "" when it has
// none: from the policy the interceptors cached for the method, and
// otherwise resolved as they resolve it, from the descriptor registry and
// the policies set in code, but not cached, since the interceptors cache
// the policy resolved with a call's own request descriptor.
func (e *engine) namespaceOf(fullMethod string) string {
	if m, ok := e.methods.Load(fullMethod); ok {
		return m.(*methodConfig).namespace
	}
	md := policy.FindMethod(e.cfg.files, fullMethod)
	var req protoreflect.MessageDescriptor
	if md != nil {
		req = md.Input()
	}
	m, _ := e.cfg.policyOf(fullMethod, md, req) // the namespace is set whatever else fails
	return m.namespace
}

// Inspector returns s's store as a [store.Inspector], and false when the
// store is not one. Read through it (Lookup, List, Stats); purge through
// [Server.Purge], which also drops the key from s's replay cache and tells
// the observer.
func (s *Server) Inspector() (store.Inspector, bool) {
	in, ok := s.e.store.(store.Inspector)
	return in, ok
}

// errNotInspector is the error of [Server.Purge] over a store that is not a
// [store.Inspector].
var errNotInspector = errors.New("idempotency: the store is not a store.Inspector")

// Purge deletes the entry under storeKey (a key [Server.StoreKey] gives, or
// one the store lists) from s's store, fenced by opts as
// [store.Inspector.Purge] fences it, and returns the entry as it was, with
// its data; a refused purge returns the store's error (wrapping
// [store.ErrInFlight], [store.ErrChanged] or [store.ErrNotFound]) and
// changes nothing in the store.
//
// Once the store has answered, whatever it answered, s's own replay cache
// ([WithReplayCache]) drops the key, so that this server stops replaying
// it at once; the other servers over the store learn of the purge through
// [store.Invalidator]. A purge the store made is reported to the observer
// as one [DecisionPurged] event whose StoreKey is storeKey and StoreTime
// the purge's, with no Method (a store key does not say which method it
// belongs to) and no Err. It returns an error, and calls nothing, when the
// store is not a [store.Inspector].
func (s *Server) Purge(ctx context.Context, storeKey string, opts store.PurgeOptions) (store.Info, error) {
	in, ok := s.Inspector()
	if !ok {
		return store.Info{}, errNotInspector
	}
	start := time.Now()
	info, err := in.Purge(ctx, storeKey, opts)
	took := time.Since(start)
	if s.e.cache != nil {
		// Moves the cache's generation on too, so that a replay that read
		// the entry before the purge does not cache it after.
		s.e.cache.invalidate(store.Invalidation{Key: storeKey})
	}
	if err != nil {
		return info, err
	}
	s.e.cfg.observer.Observe(ctx, Event{Decision: DecisionPurged, StoreKey: storeKey, StoreTime: took})
	return info, nil
}

// Package admin reaches the server's descriptors and its opening of
// stored records through adminhook, off the public API.
func init() {
	adminhook.Descriptors = func(s any) *protoregistry.Files { return s.(*Server).e.cfg.files }
	adminhook.OpenRecord = func(s any, ctx context.Context, storeKey, scope string, data []byte) ([]byte, string, error) {
		return s.(*Server).openRecord(ctx, storeKey, scope, data)
	}
}

// openRecord is [adminhook.OpenRecord]: the record data holds for scope,
// opened with s's sealing keys, and the ID of the key that sealed it.
func (s *Server) openRecord(ctx context.Context, storeKey, scope string, data []byte) ([]byte, string, error) {
	e := s.e
	if e.seal == nil {
		if seal.IsSealed(data) {
			id, _ := SealedBy(data)
			return nil, id, fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealingOff)
		}
		return data, "", nil
	}
	kr, err := e.seal.keyring(ctx, scope)
	if err != nil {
		return nil, "", fmt.Errorf("idempotency: resolving the scope's sealing keys: %w", err)
	}
	plain, id, err := e.seal.open(nil, kr, scope, storeKey, data, nil)
	if err != nil {
		return nil, id, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
	}
	return plain, id, nil
}
