package admin

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/internal/policy"
	"github.com/grpc-idempotency/idempotency/store"
)

// ResolveKey implements adminv1.AdminServiceServer. It resolves through
// [idempotency.Server.Resolve], so that every resolution is observed as a
// [idempotency.DecisionResolved] event, and logs each one, made or
// refused, as a purge is logged.
func (svc *Service) ResolveKey(ctx context.Context, req *adminv1.ResolveKeyRequest) (*adminv1.ResolveKeyResponse, error) {
	const method = adminv1.AdminService_ResolveKey_FullMethodName
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
	scope, name := scopeOf(req.GetClientKey(), req.GetScope()), req.GetName()
	if ck := req.GetClientKey(); ck != nil {
		name = ck.GetName()
	}
	rs := resolution{principal: principal, key: key, how: resolutionName(req)}
	if req.GetEtag() == "" {
		return nil, status.Error(codes.InvalidArgument, "etag is required: the etag of the abandoned entry looked at, so that an entry taken over or claimed again since is left alone")
	}
	r, err := svc.resolution(req, name)
	if err != nil {
		return nil, err
	}
	r.Scope = scope
	if err := svc.authorizedRequest(ctx, keyRequest(method, principal, key, req.GetClientKey(), req.GetScope())); err != nil {
		return nil, svc.resolveRefused(ctx, rs, "", err)
	}
	cur, err := in.Lookup(ctx, key)
	if err != nil {
		return nil, svc.resolveRefused(ctx, rs, "", svc.storeError(ctx, "lookup", err))
	}
	if etagOf(cur.Token) != req.GetEtag() {
		return nil, svc.resolveRefused(ctx, rs, stateName(cur.State), status.Error(codes.Aborted, "the entry is not the one the etag names: it was taken over, completed, or purged and claimed again since it was looked at"))
	}
	r.Token = cur.Token
	info, err := svc.s.Resolve(ctx, key, r)
	switch {
	case errors.Is(err, idempotency.ErrNotAbandoned):
		return nil, svc.resolveRefused(ctx, rs, stateName(info.State), status.Errorf(codes.FailedPrecondition, "the entry is %s, not abandoned: only an abandoned entry is resolved (purge a completed one; an in-flight one's handler may be running)", stateName(info.State)))
	case errors.Is(err, store.ErrChanged):
		return nil, svc.resolveRefused(ctx, rs, stateName(info.State), status.Error(codes.Aborted, "the entry changed since it was looked at (taken over, or completed by its late handler): look it up again"))
	case errors.Is(err, idempotency.ErrRecordCorrupt):
		return nil, svc.resolveRefused(ctx, rs, stateName(info.State), status.Error(codes.FailedPrecondition, "the entry was claimed by a sealing server, and this one has no sealing keys: resolve it through the admin service of a server that holds them"))
	case err != nil && errors.Is(err, store.ErrNotFound):
		return nil, svc.resolveRefused(ctx, rs, "", svc.storeError(ctx, "resolve", err))
	case err != nil:
		return nil, svc.resolveRefused(ctx, rs, stateName(info.State), svc.storeError(ctx, "resolve", err))
	}
	svc.logger().LogAttrs(ctx, slog.LevelInfo, "idempotency admin: key resolved", rs.attrs(stateName(info.State))...)
	if !r.Rerun {
		// The entry as the resolution left it, with the outcome stored.
		if now, err := in.Lookup(ctx, key); err == nil {
			info = now
		}
	}
	return &adminv1.ResolveKeyResponse{Entry: svc.entry(ctx, info, scope, true)}, nil
}

// resolution returns the [idempotency.Resolution] of req, for name's
// method or operation, without its token and scope, or INVALID_ARGUMENT.
// A response is read as JSON into the method's response type, found in the
// server's descriptors as the server's replays find it.
func (svc *Service) resolution(req *adminv1.ResolveKeyRequest, name string) (idempotency.Resolution, error) {
	r := idempotency.Resolution{Name: name}
	switch res := req.GetResolution().(type) {
	case *adminv1.ResolveKeyRequest_Rerun:
		if !res.Rerun {
			return r, status.Error(codes.InvalidArgument, "rerun must be true; say how to resolve the key with rerun, response_json or error")
		}
		r.Rerun = true
	case *adminv1.ResolveKeyRequest_Error:
		c := res.Error.GetCode()
		if c <= 0 || c > int32(codes.Unauthenticated) {
			return r, status.Errorf(codes.InvalidArgument, "error.code %d is not a gRPC status code other than OK (1 to 16)", c)
		}
		r.Err = status.Error(codes.Code(c), res.Error.GetMessage())
	case *adminv1.ResolveKeyRequest_ResponseJson:
		msg, err := svc.response(name, res.ResponseJson)
		if err != nil {
			return r, err
		}
		r.Response = msg
	default:
		return r, status.Error(codes.InvalidArgument, "say how to resolve the key: rerun, response_json or error")
	}
	return r, nil
}

// response reads text, JSON, as the response message of the method name,
// or returns INVALID_ARGUMENT.
func (svc *Service) response(name, text string) (proto.Message, error) {
	if name == "" || name[0] != '/' {
		return nil, status.Error(codes.InvalidArgument, "a response needs the full method name whose key it is (client_key.name, or name with a store_key), so that its JSON is read as the method's response type")
	}
	res := newResolver(svc.files)
	md := policy.FindMethod(res.files, name)
	if md == nil {
		return nil, status.Errorf(codes.InvalidArgument, "the server's descriptors do not have the method %s: its response cannot be read", name)
	}
	mt, err := res.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "the response type %s of %s is not known", md.Output().FullName(), name)
	}
	msg := mt.New().Interface()
	if err := (protojson.UnmarshalOptions{Resolver: res}).Unmarshal([]byte(text), msg); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "response_json is not a %s: %v", md.Output().FullName(), err)
	}
	return msg, nil
}

// resolutionName is how req resolves its key, as the log lines name it.
func resolutionName(req *adminv1.ResolveKeyRequest) string {
	switch req.GetResolution().(type) {
	case *adminv1.ResolveKeyRequest_Rerun:
		return "rerun"
	case *adminv1.ResolveKeyRequest_ResponseJson:
		return "response"
	case *adminv1.ResolveKeyRequest_Error:
		return "error"
	}
	return ""
}

// resolution is one ResolveKey call, as its log line tells it.
type resolution struct {
	principal, key, how string
}

func (r resolution) attrs(state string) []slog.Attr {
	return []slog.Attr{
		slog.String("principal", r.principal),
		slog.String("store_key", r.key),
		slog.String("state", state),
		slog.String("resolution", r.how),
	}
}

// resolveRefused logs the refusal of r, whose entry was in state ("" when
// unknown), and returns err, its status.
func (svc *Service) resolveRefused(ctx context.Context, r resolution, state string, err error) error {
	attrs := append(r.attrs(state), slog.String("code", status.Code(err).String()), slog.String("reason", status.Convert(err).Message()))
	svc.logger().LogAttrs(ctx, slog.LevelInfo, "idempotency admin: resolve refused", attrs...)
	return err
}
