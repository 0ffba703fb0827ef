package admin

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/grpc-idempotency/idempotency"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/internal/adminhook"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/store"
)

// Service is the admin service of one [idempotency.Server]
// (idempotency.admin.v1.AdminService): it looks up, lists, purges, counts
// and resolves the keys of the server's store. Register it with
// adminv1.RegisterAdminServiceServer on the gRPC server, or, better, on a
// gRPC server of its own that listens where only operators reach it.
type Service struct {
	adminv1.UnimplementedAdminServiceServer

	s                *idempotency.Server
	authorize        AuthorizeFunc
	authorizeRequest func(context.Context, Request) error // nil: none
	log              *slog.Logger                         // nil: slog.Default() at each line
	files            *protoregistry.Files
}

// NewService returns the admin service of s. Every call is first given to
// authorize, which may refuse it: the service is never open by default,
// and a nil authorize panics. A team that really wants every caller let
// in writes so, in a function that returns nil.
//
// It answers INVALID_ARGUMENT for arguments that cannot work, NOT_FOUND
// for a key that holds no live entry, UNIMPLEMENTED when the server's
// store is not a [store.Inspector], and UNAVAILABLE when the store fails
// (its error is logged, not sent). Every purge goes through
// [idempotency.Server.Purge], so it is observed as a
// [idempotency.DecisionPurged] event and leaves the server's replay cache
// at once; every purge made or refused is one log line (see [WithLogger]),
// which names the store key and never the client's key. It panics when s
// is nil or an option cannot work, naming it.
func NewService(s *idempotency.Server, authorize AuthorizeFunc, opts ...Option) *Service {
	switch {
	case s == nil:
		panic("admin: NewService: the server must not be nil")
	case authorize == nil:
		panic("admin: NewService: authorize must not be nil: the admin service is never open by default")
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	if len(c.invalid) > 0 {
		panic(strings.Join(c.invalid, "; "))
	}
	return &Service{s: s, authorize: authorize, authorizeRequest: c.authorizeRequest, log: c.log, files: adminhook.Descriptors(s)}
}

// GetKey implements adminv1.AdminServiceServer.
func (svc *Service) GetKey(ctx context.Context, req *adminv1.GetKeyRequest) (*adminv1.GetKeyResponse, error) {
	const method = adminv1.AdminService_GetKey_FullMethodName
	principal, err := svc.authorized(ctx, method)
	if err != nil {
		return nil, err
	}
	in, err := svc.inspector()
	if err != nil {
		return nil, err
	}
	key, err := svc.storeKey(req.GetStoreKey(), req.GetClientKey())
	if err != nil {
		return nil, err
	}
	if err := svc.authorizedRequest(ctx, keyRequest(method, principal, key, req.GetClientKey(), req.GetScope())); err != nil {
		return nil, err
	}
	info, err := in.Lookup(ctx, key)
	if err != nil {
		return nil, svc.storeError(ctx, "lookup", err)
	}
	return &adminv1.GetKeyResponse{Entry: svc.entry(ctx, info, scopeOf(req.GetClientKey(), req.GetScope()), true)}, nil
}

// ListKeys implements adminv1.AdminServiceServer.
func (svc *Service) ListKeys(ctx context.Context, req *adminv1.ListKeysRequest) (*adminv1.ListKeysResponse, error) {
	const method = adminv1.AdminService_ListKeys_FullMethodName
	principal, err := svc.authorized(ctx, method)
	if err != nil {
		return nil, err
	}
	in, err := svc.inspector()
	if err != nil {
		return nil, err
	}
	opts, err := listOptions(req)
	if err != nil {
		return nil, err
	}
	if err := svc.authorizedRequest(ctx, Request{Method: method, Principal: principal, AllScopes: true}); err != nil {
		return nil, err
	}
	page, err := in.List(ctx, opts)
	if err != nil {
		return nil, svc.storeError(ctx, "list", err)
	}
	resp := &adminv1.ListKeysResponse{Entries: make([]*adminv1.Entry, len(page.Entries)), NextPageToken: page.Next}
	for i, info := range page.Entries {
		resp.Entries[i] = svc.entry(ctx, info, "", false)
	}
	return resp, nil
}

// listOptions returns the store's options of req, or INVALID_ARGUMENT. A
// page size above the store's largest is taken as the largest (AIP-158).
func listOptions(req *adminv1.ListKeysRequest) (store.ListOptions, error) {
	var opts store.ListOptions
	switch req.GetState() {
	case adminv1.State_STATE_UNSPECIFIED:
	case adminv1.State_STATE_IN_FLIGHT:
		opts.State = store.StateInFlight
	case adminv1.State_STATE_COMPLETED:
		opts.State = store.StateCompleted
	case adminv1.State_STATE_ABANDONED:
		opts.State = store.StateAbandoned
	default:
		return opts, status.Errorf(codes.InvalidArgument, "state %d is not a state", req.GetState())
	}
	if d := req.GetMinAge(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return opts, status.Error(codes.InvalidArgument, "min_age must be a valid duration, zero or more")
		}
		opts.MinAge = d.AsDuration()
	}
	n := req.GetPageSize()
	if n < 0 {
		return opts, status.Errorf(codes.InvalidArgument, "page_size %d is negative", n)
	}
	opts.Limit, opts.Cursor = int(min(n, store.MaxListLimit)), req.GetPageToken()
	return opts, nil
}

// PurgeKey implements adminv1.AdminServiceServer.
func (svc *Service) PurgeKey(ctx context.Context, req *adminv1.PurgeKeyRequest) (*adminv1.PurgeKeyResponse, error) {
	const method = adminv1.AdminService_PurgeKey_FullMethodName
	principal, err := svc.authorized(ctx, method)
	if err != nil {
		return nil, err
	}
	in, err := svc.inspector()
	if err != nil {
		return nil, err
	}
	key, err := svc.storeKey(req.GetStoreKey(), req.GetClientKey())
	if err != nil {
		return nil, err
	}
	p := purge{principal: principal, key: key, force: req.GetForce(), etag: req.GetEtag()}
	if p.force && p.etag == "" {
		return nil, status.Error(codes.InvalidArgument, "force needs the etag of the entry looked at: an in-flight key may have been claimed again since, by a handler that is running")
	}
	if err := svc.authorizedRequest(ctx, keyRequest(method, principal, key, req.GetClientKey(), req.GetScope())); err != nil {
		return nil, svc.refused(ctx, p, "", err)
	}
	opts := store.PurgeOptions{InFlight: p.force}
	if p.etag != "" {
		// The etag names the claim; the store fences the purge by the
		// claim's token, which the etag is derived from and never leaves
		// the server.
		cur, err := in.Lookup(ctx, key)
		if err != nil {
			return nil, svc.refused(ctx, p, "", svc.storeError(ctx, "lookup", err))
		}
		if etagOf(cur.Token) != p.etag {
			return nil, svc.refused(ctx, p, stateName(cur.State), status.Error(codes.Aborted, "the entry is not the one the etag names: it was purged or expired and claimed again since it was looked at"))
		}
		opts.Token = cur.Token
	}
	info, err := svc.s.Purge(ctx, key, opts)
	if err != nil {
		return nil, svc.refused(ctx, p, stateName(info.State), svc.storeError(ctx, "purge", err))
	}
	svc.logger().LogAttrs(ctx, slog.LevelInfo, "idempotency admin: key purged", p.attrs(stateName(info.State))...)
	return &adminv1.PurgeKeyResponse{Entry: svc.entry(ctx, info, scopeOf(req.GetClientKey(), req.GetScope()), true)}, nil
}

// scopeOf returns the scope a request's sealed record is opened for: the
// client key's own when the request names one (its scope field ignored),
// and otherwise the request's scope field, which goes with its store key.
func scopeOf(ck *adminv1.ClientKey, scope string) string {
	if ck != nil {
		return ck.GetScope()
	}
	return scope
}

// purge is one PurgeKey call, as its log line tells it.
type purge struct {
	principal, key, etag string
	force                bool
}

func (p purge) attrs(state string) []slog.Attr {
	return []slog.Attr{
		slog.String("principal", p.principal),
		slog.String("store_key", p.key),
		slog.String("state", state),
		slog.Bool("force", p.force),
		slog.Bool("fenced", p.etag != ""),
	}
}

// refused logs the refusal of p, whose entry was in state ("" when
// unknown), and returns err, its status.
func (svc *Service) refused(ctx context.Context, p purge, state string, err error) error {
	attrs := append(p.attrs(state), slog.String("code", status.Code(err).String()), slog.String("reason", status.Convert(err).Message()))
	svc.logger().LogAttrs(ctx, slog.LevelInfo, "idempotency admin: purge refused", attrs...)
	return err
}

// GetStats implements adminv1.AdminServiceServer.
func (svc *Service) GetStats(ctx context.Context, _ *adminv1.GetStatsRequest) (*adminv1.GetStatsResponse, error) {
	const method = adminv1.AdminService_GetStats_FullMethodName
	principal, err := svc.authorized(ctx, method)
	if err != nil {
		return nil, err
	}
	in, err := svc.inspector()
	if err != nil {
		return nil, err
	}
	if err := svc.authorizedRequest(ctx, Request{Method: method, Principal: principal, AllScopes: true}); err != nil {
		return nil, err
	}
	st, err := in.Stats(ctx)
	if err != nil {
		return nil, svc.storeError(ctx, "stats", err)
	}
	return &adminv1.GetStatsResponse{
		InFlight:  &adminv1.Count{Entries: st.InFlight.Entries, SizeBytes: st.InFlight.Bytes},
		Completed: &adminv1.Count{Entries: st.Completed.Entries, SizeBytes: st.Completed.Bytes},
		Abandoned: &adminv1.Count{Entries: st.Abandoned.Entries, SizeBytes: st.Abandoned.Bytes},
		Estimated: st.Estimated,
	}, nil
}

// authorized runs the authorization function for method, and returns the
// principal, or the status that refuses the call.
func (svc *Service) authorized(ctx context.Context, method string) (string, error) {
	principal, err := svc.authorize(ctx, method)
	if err == nil {
		return principal, nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
		return "", st.Err()
	}
	return "", status.Error(codes.PermissionDenied, "the caller may not call "+method)
}

// keyRequest is the Request of a call of method by principal that names
// one key: ck, a client key, whose store key is key, or else key itself,
// with scope, the request's scope field.
func keyRequest(method, principal, key string, ck *adminv1.ClientKey, scope string) Request {
	r := Request{Method: method, Principal: principal, StoreKey: key, Scope: scopeOf(ck, scope)}
	if ck != nil {
		r.Name, r.Key = ck.GetName(), ck.GetKey()
	} else {
		r.ByStoreKey = true
	}
	return r
}

// authorizedRequest runs the function of [WithAuthorizeRequest], if any,
// for r, and returns the status that refuses the call.
func (svc *Service) authorizedRequest(ctx context.Context, r Request) error {
	if svc.authorizeRequest == nil {
		return nil
	}
	err := svc.authorizeRequest(ctx, r)
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
		return st.Err()
	}
	return status.Error(codes.PermissionDenied, "the caller may not call "+r.Method+" for what this request names")
}

func (svc *Service) inspector() (store.Inspector, error) {
	in, ok := svc.s.Inspector()
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the server's store cannot be inspected: it is not a store.Inspector")
	}
	return in, nil
}

// storeKey returns the store key a request names: storeKey itself, or the
// key the server derives from ck.
func (svc *Service) storeKey(storeKey string, ck *adminv1.ClientKey) (string, error) {
	switch {
	case storeKey != "":
		if !isStoreKey(storeKey) {
			return "", status.Error(codes.InvalidArgument, "store_key is not a store key (43 characters of unpadded base64url); name a client's key with client_key")
		}
		return storeKey, nil
	case ck != nil:
		key, err := svc.s.StoreKey(ck.GetName(), ck.GetScope(), ck.GetKey())
		if err != nil {
			return "", status.Error(codes.InvalidArgument, "client_key: "+err.Error())
		}
		return key, nil
	}
	return "", status.Error(codes.InvalidArgument, "a store_key or a client_key is required")
}

// storeKeyLen is the length of every store key the server derives: the
// unpadded base64url of a SHA-256.
const storeKeyLen = 43

// isStoreKey reports whether k has the shape of a store key, so that a
// client's key given as a store key is refused rather than not found.
func isStoreKey(k string) bool {
	if len(k) != storeKeyLen {
		return false
	}
	for i := range len(k) {
		switch c := k[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// storeError returns the status of err, the error of the store's op: the
// store's refusals as their codes; a failure of the store itself as
// UNAVAILABLE, logged, with no backend text sent.
func (svc *Service) storeError(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, "the key holds no live entry: never claimed, released, purged, or expired")
	case errors.Is(err, store.ErrInFlight):
		return status.Error(codes.FailedPrecondition, "the entry is in flight: purge it with force and its etag once its handler is known to be gone")
	case errors.Is(err, store.ErrChanged):
		return status.Error(codes.Aborted, "the entry changed since it was looked at (completed, or purged and claimed again): look it up again")
	case errors.Is(err, store.ErrCursor):
		return status.Error(codes.InvalidArgument, "page_token is not a token of this store's listing (a token of an earlier release is refused: start the walk again)")
	case errors.Is(err, store.ErrCorrupt):
		return status.Error(codes.DataLoss, "the value under the key is not an entry of this store")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	svc.logger().LogAttrs(ctx, slog.LevelWarn, "idempotency admin: store failed", slog.String("op", op), slog.Any("error", err))
	return status.Error(codes.Unavailable, "idempotency store unavailable")
}

func (svc *Service) logger() *slog.Logger {
	if svc.log != nil {
		return svc.log
	}
	return slog.Default()
}

// entry returns info as an Entry; withOutcome adds the outcome of a
// completed entry, read as the server reads it for scope (see [scopeOf]).
func (svc *Service) entry(ctx context.Context, info store.Info, scope string, withOutcome bool) *adminv1.Entry {
	e := &adminv1.Entry{
		StoreKey:     info.Key,
		State:        stateOf(info.State),
		Etag:         etagOf(info.Token),
		Fingerprint:  info.Fingerprint,
		SizeBytes:    info.Size,
		ClaimTime:    timestamp(info.Claimed),
		CompleteTime: timestamp(info.Completed),
		ExpireTime:   timestamp(info.Expires),
		Attempt:      int32(min(info.Attempt, math.MaxInt32)), //nolint:gosec // bounded above
	}
	if !utf8.ValidString(info.Key) {
		// A store holds whatever bytes were put in it: a key copied or
		// written by hand. A proto string must be UTF-8, and one such key
		// must not fail the page that lists it.
		e.StoreKey, e.KeyError = strconv.Quote(info.Key), keyNotUTF8
	}
	if withOutcome && info.State == store.StateCompleted {
		e.Outcome, e.SealedBy, e.OutcomeError, e.SealedUnopened = svc.outcome(ctx, info, scope)
	}
	return e
}

// keyNotUTF8 is the key_error of an entry whose store key is not UTF-8.
const keyNotUTF8 = "the store key is not UTF-8, so it is not a key the server derives: store_key is it quoted and escaped, and cannot be named in GetKey or PurgeKey"

// outcome reads the record of info, a completed entry, as the server reads
// it for scope: opened with the server's sealing keys
// (adminhook.OpenRecord), then decoded and checked against the
// entry's fingerprint. It returns the outcome, the ID of the key that
// sealed the record ("" when it is not sealed), and, in place of the
// outcome, why it cannot be read, and whether that is because it is sealed
// and did not open (the Entry's sealed_unopened).
func (svc *Service) outcome(ctx context.Context, info store.Info, scope string) (_ *adminv1.Outcome, sealedBy, why string, unopened bool) {
	data, sealedBy, err := adminhook.OpenRecord(svc.s, ctx, info.Key, scope, info.Data)
	_, sealed := idempotency.SealedBy(info.Data)
	if sealedBy == "" {
		sealedBy, _ = idempotency.SealedBy(info.Data)
	}
	sealedBy = text([]byte(sealedBy))
	if err != nil {
		return nil, sealedBy, svc.openError(ctx, info.Key, err), sealed
	}
	r, err := record.Decode(data, info.Fingerprint)
	if err != nil {
		return nil, sealedBy, text([]byte(err.Error())), false
	}
	return explain(r, newResolver(svc.files)), sealedBy, "", false
}

// openError says why the record under key does not open: the reason
// the server gives (adminhook.OpenRecord) for a record that does not open
// with the scope's keys, and for a failure to find those keys
// ([idempotency.Sealing.TenantKeys]) the code and message of a gRPC
// status, or else no more than that they were not found, the error being
// logged rather than sent, as a store's is.
func (svc *Service) openError(ctx context.Context, key string, err error) string {
	if errors.Is(err, idempotency.ErrRecordCorrupt) {
		return text([]byte(err.Error()))
	}
	var se interface{ GRPCStatus() *status.Status }
	switch {
	case errors.As(err, &se):
		st := se.GRPCStatus()
		return text([]byte("the scope's sealing keys could not be found: " + st.Code().String() + ": " + st.Message()))
	case errors.Is(err, context.Canceled):
		return "the scope's sealing keys could not be found: " + context.Canceled.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "the scope's sealing keys could not be found: " + context.DeadlineExceeded.Error()
	}
	svc.logger().LogAttrs(ctx, slog.LevelWarn, "idempotency admin: the scope's sealing keys could not be found", slog.String("store_key", key), slog.Any("error", err))
	return "the scope's sealing keys could not be found (Sealing.TenantKeys failed; its error is logged)"
}

// etagOf derives an entry's etag from its claim's owner token: 128 bits of
// its SHA-256, so that the etag names the claim and gives nothing that acts
// on the store.
func etagOf(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func stateOf(s store.State) adminv1.State {
	switch s {
	case store.StateInFlight:
		return adminv1.State_STATE_IN_FLIGHT
	case store.StateCompleted:
		return adminv1.State_STATE_COMPLETED
	case store.StateAbandoned:
		return adminv1.State_STATE_ABANDONED
	}
	return adminv1.State_STATE_UNSPECIFIED
}

// stateName is the state as the log lines name it.
func stateName(s store.State) string {
	switch s {
	case store.StateInFlight:
		return "in_flight"
	case store.StateCompleted:
		return "completed"
	case store.StateAbandoned:
		return "abandoned"
	}
	return ""
}

// Timestamps a protojson encoder accepts: years 1 to 9999.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// timestamp returns t, nil for the zero Time, and within the years 1 to
// 9999 (a store's saturated expiry is far in the future).
func timestamp(t time.Time) *timestamppb.Timestamp {
	switch {
	case t.IsZero():
		return nil
	case t.Before(minTime):
		t = minTime
	case t.After(maxTime):
		t = maxTime
	}
	return timestamppb.New(t)
}
