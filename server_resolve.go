package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/policy"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/internal/seal"
	"github.com/grpc-idempotency/idempotency/store"
)

// ErrNotAbandoned is the error of [Server.Resolve] for an entry that is not
// abandoned: in flight under a live lease, or completed. Nothing is
// changed; look the key up again.
var ErrNotAbandoned = errors.New("idempotency: the entry is not abandoned")

// Resolution is how an operator resolves an abandoned key
// ([Server.Resolve]): exactly one of Rerun, Response and Err.
type Resolution struct {
	// Token fences the resolution: the [store.Info.Token] of the abandoned
	// entry as the operator looked it up. Required.
	Token string
	// Name is the full method name ("/payments.v1.Payments/Charge") or
	// the operation of [Do] whose key it is: it gives the outcome's
	// retention (its policy's, as its calls resolve it; the server's
	// default, [WithRetention], for "") and, for a method the descriptors
	// know, the type the Response must be and whether it is
	// server-streaming.
	Name string
	// Scope is the scope of the key's calls, for which the outcome is
	// sealed when the server seals records ([WithSealing]).
	Scope string
	// Rerun deletes the abandoned entry, so that the next call of the key
	// runs its handler again.
	Rerun bool
	// Response completes the entry with this response, stored as the
	// handler's would be: a server-streaming method's stream of this one
	// message, ended OK.
	Response proto.Message
	// Err completes the entry with this gRPC status (its code must not be
	// OK), stored as a handler's error would be, whatever codes
	// [WithStoredCodes] keeps: the operator determined it.
	Err error
}

// Resolve resolves the abandoned entry under storeKey (a key
// [Server.StoreKey] gives, or one the store lists): the entry's claim ran
// out while its handler may have run, and a method whose [AbandonPolicy]
// is [AbandonBlock] refuses its calls until it is resolved. r.Rerun
// deletes it ([store.Inspector.Purge] of an in-flight entry fenced by
// r.Token), so that the next call runs the handler; r.Response or r.Err
// takes it over ([store.Store.Claim] with TakeOver) and completes it
// ([store.Store.Complete] under the take-over's own token) with the record
// the engine stores for the method, sealed when the server seals records,
// so that every call of the key replays it byte for byte, marked
// replayed. Either way the handler that outlived its lease is fenced out:
// its own Complete is refused, and its caller is told to retry the key
// ([ErrKeyInUse]), for the resolution. A store that fails after the
// take-over leaves the entry in flight under it until the method's lease
// runs out, then abandoned again, as the next attempt: look it up again.
//
// It returns the entry as it was before. It refuses, changing nothing,
// with an error wrapping [store.ErrChanged] when the entry is not the one
// r.Token names (taken over, purged and claimed again, or completed by
// its late handler since it was looked at; a take-over of another
// attempt than the one looked at is given back), with [ErrNotAbandoned] when
// the entry is not abandoned, with [store.ErrNotFound] when the key holds
// no live entry, with [ErrRecordCorrupt] when a sealing server claimed the
// entry and s has no sealing keys (its calls would refuse the unsealed
// record it would store), and with an argument error for a resolution that is not
// exactly one of the three or a response that does not fit the method.
// A resolution made is reported to the observer as one
// [DecisionResolved] event whose StoreKey is storeKey, with no Method;
// the server's replay cache drops the key as after [Server.Purge].
func (s *Server) Resolve(ctx context.Context, storeKey string, r Resolution) (store.Info, error) {
	in, ok := s.Inspector()
	if !ok {
		return store.Info{}, errNotInspector
	}
	if err := r.check(); err != nil {
		return store.Info{}, err
	}
	start := time.Now()
	info, err := in.Lookup(ctx, storeKey)
	switch {
	case err != nil:
		return info, err
	case info.Token != r.Token:
		return info, fmt.Errorf("idempotency: resolving %s: %w", storeKey, store.ErrChanged)
	case info.State != store.StateAbandoned:
		return info, ErrNotAbandoned
	}
	if r.Rerun {
		_, err = in.Purge(ctx, storeKey, store.PurgeOptions{InFlight: true, Token: r.Token})
	} else {
		err = s.complete(ctx, storeKey, info, r)
	}
	if s.e.cache != nil {
		s.e.cache.invalidate(store.Invalidation{Key: storeKey})
	}
	if errors.Is(err, store.ErrLeaseLost) {
		err = fmt.Errorf("idempotency: resolving %s: %w", storeKey, store.ErrChanged)
	}
	if err != nil {
		return info, err
	}
	s.e.cfg.observer.Observe(ctx, Event{Decision: DecisionResolved, StoreKey: storeKey, StoreTime: time.Since(start)})
	return info, nil
}

// check returns an argument error unless r is exactly one resolution.
func (r Resolution) check() error {
	n := 0
	for _, set := range []bool{r.Rerun, r.Response != nil, r.Err != nil} {
		if set {
			n++
		}
	}
	switch {
	case r.Token == "":
		return errors.New("idempotency: Resolve needs the token of the abandoned entry")
	case n != 1:
		return errors.New("idempotency: Resolve needs exactly one of Rerun, Response and Err")
	case r.Err != nil && status.Code(r.Err) == codes.OK:
		return errors.New("idempotency: Resolve needs an error whose code is not OK")
	}
	return nil
}

// complete completes the abandoned entry info under storeKey with the
// record of r, for r.Name's method or operation, sealed for r.Scope,
// under a token of its own ([Server.takeOver]).
func (s *Server) complete(ctx context.Context, storeKey string, info store.Info, r Resolution) error {
	e := s.e
	m, md := e.otherOp, (protoreflect.MethodDescriptor)(nil)
	if op, ok := e.ops[r.Name]; ok {
		m = op // an operation's own policy (WithOperationPolicy)
	}
	if len(r.Name) > 0 && r.Name[0] == '/' {
		md = policy.FindMethod(e.cfg.files, r.Name)
		if cached, ok := e.methods.Load(r.Name); ok {
			m = cached.(*methodConfig)
		} else {
			var req protoreflect.MessageDescriptor
			if md != nil {
				req = md.Input()
			}
			m, _ = e.cfg.policyOf(r.Name, md, req) // its retention and namespace are set whatever else fails
			if md != nil {
				m.responseType = messageType(md.Output())
			}
		}
	}
	rec, err := resolvedRecord(m, md, info, r)
	if err != nil {
		return err
	}
	data, err := record.Encode(rec)
	if err != nil {
		return fmt.Errorf("idempotency: encoding the resolution: %w", err)
	}
	if data, err = e.sealResolved(ctx, storeKey, r.Scope, info.Fingerprint, data); err != nil {
		return err
	}
	token, err := e.takeOver(ctx, storeKey, info, m)
	if err != nil {
		return err
	}
	return e.store.Complete(ctx, storeKey, token, data, m.retention)
}

// takeOver takes the abandoned entry info under storeKey over for a
// resolution and returns the token it owns it by: the token that
// abandoned it then can neither complete, release nor extend it, so the
// late handler's outcome can no longer land beside the operator's
// (decision 314). A claim of another attempt than the one info describes
// (taken over and abandoned again since it was looked at, or purged and
// free) is given back at once and refused with an error wrapping
// [store.ErrChanged]; so is an entry no longer abandoned (completed by
// its late handler, in flight under another claim).
func (e *engine) takeOver(ctx context.Context, storeKey string, info store.Info, m *methodConfig) (string, error) {
	c, err := e.store.Claim(ctx, storeKey, info.Fingerprint, m.lease, store.ClaimOptions{Keep: m.retention, TakeOver: true})
	switch {
	case err != nil:
		return "", fmt.Errorf("idempotency: resolving %s: %w", storeKey, err)
	case !c.Won():
		return "", fmt.Errorf("idempotency: resolving %s: %w", storeKey, store.ErrChanged)
	case c.Attempt != info.Attempt+1:
		// Give back what it took: a free key (purged since) is released,
		// another abandoned attempt is abandoned again, as it was.
		giveBack := e.store.Abandon
		if c.Attempt == 1 {
			giveBack = e.store.Release
		}
		if err := giveBack(ctx, storeKey, c.Token); err != nil {
			return "", fmt.Errorf("idempotency: resolving %s: the entry changed, and giving back the claim taken to resolve it failed (look it up): %w", storeKey, err)
		}
		return "", fmt.Errorf("idempotency: resolving %s: %w", storeKey, store.ErrChanged)
	}
	return c.Token, nil
}

// resolvedRecord returns the record the engine stores for r's outcome of
// the method md under policy m (md nil for an operation or a method the
// descriptors do not have): a response or an error, or, for a
// server-streaming method, the stream of the response ended OK or the
// stream of no message ended in the error. A response of another type
// than the method's is an argument error, unless the method has a
// namespace (whose records any message of the same wire format reads).
func resolvedRecord(m *methodConfig, md protoreflect.MethodDescriptor, info store.Info, r Resolution) (*recordv1.Record, error) {
	now := time.Now()
	created := info.Claimed
	if created.IsZero() || created.After(now) {
		created = now
	}
	rec := &recordv1.Record{
		Version: record.Version, State: recordv1.State_STATE_COMPLETED, Fingerprint: info.Fingerprint,
		CreatedAt: timestamppb.New(created), CompletedAt: timestamppb.New(now),
	}
	var msg []byte
	if r.Response != nil {
		var name string
		var err error
		if msg, name, err = encodeMessage(nil, r.Response); err != nil {
			return nil, fmt.Errorf("idempotency: the resolution's response: %w", err)
		}
		if mt := m.responseType; mt != nil && m.namespace == "" && string(mt.Descriptor().FullName()) != name {
			return nil, fmt.Errorf("idempotency: the resolution's response is a %s; %s returns %s", name, r.Name, mt.Descriptor().FullName())
		}
		rec.ResponseType = name
	}
	switch {
	case md != nil && md.IsStreamingServer():
		rec.Outcome = recordv1.Outcome_OUTCOME_STREAM
		if m.responseType != nil {
			rec.ResponseType = string(m.responseType.Descriptor().FullName())
		}
		if msg != nil {
			rec.Messages = [][]byte{msg}
		} else {
			rec.Status = recordStatus(r.Err)
		}
	case msg != nil:
		rec.Outcome, rec.Response = recordv1.Outcome_OUTCOME_RESPONSE, msg
	default:
		rec.Outcome, rec.Status = recordv1.Outcome_OUTCOME_ERROR, recordStatus(r.Err)
	}
	return rec, nil
}

// errResolveSealed is why a server without sealing keys does not resolve
// an entry that a sealing server claimed.
var errResolveSealed = errors.New("the entry was claimed by a sealing server, and this server has no sealing keys (WithSealing): resolve it through a server that holds them")

// sealResolved returns data, the record of a resolution of the entry
// under storeKey whose fingerprint is fp, as the server's calls of scope
// store it: sealed with the scope's primary key when the server seals and
// the entry's fingerprint is keyed (an entry claimed by a sealing
// server); as it is otherwise, as a server stores it for an entry written
// before sealing.
func (e *engine) sealResolved(ctx context.Context, storeKey, scope string, fp, data []byte) ([]byte, error) {
	_, keyed := seal.FingerprintKeyID(fp)
	switch {
	case !keyed:
		return data, nil
	case e.seal == nil:
		// Its calls would refuse an unsealed record under a keyed
		// fingerprint as corrupt: store nothing.
		return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, errResolveSealed)
	}
	kr, err := e.seal.keyring(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("idempotency: resolving the scope's sealing keys: %w", err)
	}
	id := kr.primary.ID
	sealed := e.seal.derive(kr, kr.primary, scope).Seal(nil, id, storeKey, data)
	e.seal.countSealed(id)
	return sealed, nil
}
