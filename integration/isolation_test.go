package idempotency_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// tenantKey carries the authenticated tenant in a context.
type tenantKey struct{}

// bearerTenants maps bearer tokens to tenants, as an authentication
// service would.
var bearerTenants = map[string]string{"Bearer tok-a": "tenant-a", "Bearer tok-b": "tenant-b"}

// authenticate is the authentication interceptor that runs before the
// idempotency interceptor: it maps the bearer token to a tenant.
func authenticate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) != 1 || bearerTenants[vals[0]] == "" {
		return nil, status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	return handler(context.WithValue(ctx, tenantKey{}, bearerTenants[vals[0]]), req)
}

// tenantScope is the WithScope function: the authenticated tenant, never
// anything the client chose.
func tenantScope(ctx context.Context) (string, error) {
	t, ok := ctx.Value(tenantKey{}).(string)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no authenticated tenant")
	}
	return t, nil
}

// tenantHandler answers with the tenant it ran for.
func tenantHandler(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	t, _ := ctx.Value(tenantKey{}).(string)
	return &testingv1.DoResponse{Payload: t + ":" + req.GetPayload()}, nil
}

func asTenant(ctx context.Context, token, key string) context.Context {
	return withKey(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), key)
}

// TestIsolationTenants: with WithScope returning the authenticated tenant,
// tenant B sending tenant A's key gets its own execution, never A's answer,
// and not even a hint that A used the key (no IDEMPOTENCY_KEY_REUSED for a
// different request), on the memory store and on Redis.
func TestIsolationTenants(t *testing.T) {
	t.Parallel()
	for name, newStore := range storeBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			fs := faultstore.New(newStore(t))
			srv := testserver.New(t, &testserver.Service{Handler: tenantHandler}, grpc.ChainUnaryInterceptor(
				authenticate, idempotency.UnaryServerInterceptor(fs, idempotency.WithScope(tenantScope))))
			client := srv.Client(t)
			do := func(token, key, payload string) (*testingv1.DoResponse, bool, error) {
				var header metadata.MD
				resp, err := client.Do(asTenant(ctx, token, key), &testingv1.DoRequest{Payload: payload}, grpc.Header(&header))
				return resp, len(header.Get(idempotency.ReplayedKey)) > 0, err
			}
			want := func(what string, resp *testingv1.DoResponse, replayed bool, err error, payload string, execution int64, wantReplayed bool) {
				t.Helper()
				if err != nil || resp.GetPayload() != payload || resp.GetExecution() != execution || replayed != wantReplayed {
					t.Fatalf("%s: %v (replayed %v), %v; want %q execution %d replayed %v", what, resp, replayed, err, payload, execution, wantReplayed)
				}
			}
			r, rep, err := do("tok-a", "shared-key", "charge")
			want("A first", r, rep, err, "tenant-a:charge", 1, false)
			r, rep, err = do("tok-b", "shared-key", "charge")
			want("B, same key and request", r, rep, err, "tenant-b:charge", 2, false)
			r, rep, err = do("tok-b", "other-b", "x")
			want("B, another key", r, rep, err, "tenant-b:x", 3, false)
			r, rep, err = do("tok-a", "other-b", "different request")
			want("A, B's key with another request", r, rep, err, "tenant-a:different request", 4, false)
			r, rep, err = do("tok-a", "shared-key", "charge")
			want("A again", r, rep, err, "tenant-a:charge", 1, true)
			r, rep, err = do("tok-b", "shared-key", "charge")
			want("B again", r, rep, err, "tenant-b:charge", 2, true)

			calls := len(fs.Calls())
			if _, _, err := do("tok-forged", "shared-key", "charge"); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("unknown token: %v, want UNAUTHENTICATED", err)
			}
			if len(fs.Calls()) != calls || srv.Service.Executions() != 4 {
				t.Fatalf("an unauthenticated call reached the store or the handler")
			}
		})
	}
}

// TestIsolationScopeErrorBeforeStore: a scope function that fails refuses the
// call with its status before the store is touched (the interceptor is
// used without the authentication interceptor in front).
func TestIsolationScopeErrorBeforeStore(t *testing.T) {
	t.Parallel()
	d := newDirectServer(t, idempotency.WithScope(tenantScope))
	_, err := d.Call(t.Context(), metadata.MD{idempotency.MetadataKey: {"k"}}, &testingv1.DoRequest{})
	if status.Code(err) != codes.Unauthenticated || d.Ran.Load() != 0 || len(d.Store.Calls()) != 0 {
		t.Fatalf("got %v, ran %d, store calls %d; want UNAUTHENTICATED before the store", err, d.Ran.Load(), len(d.Store.Calls()))
	}
}

// hashedKey is what every Redis key must look like: the prefix and a
// base64url SHA-256 (43 characters, no padding).
var hashedKey = regexp.MustCompile(`^` + regexp.QuoteMeta(redisstore.DefaultPrefix) + `[A-Za-z0-9_-]{43}$`)

// TestIsolationRedisKeysAreHashed: client keys that look like paths, Cluster hash
// tags, the store's own prefix, glob patterns or Redis syntax never shape
// the Redis key space: after calls with them (in two scopes), SCAN finds
// only prefix + 43-character base64url keys, one per call, and no client
// key text in any of them.
func TestIsolationRedisKeysAreHashed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rs := redistest.StartServer(t)
	direct := rs.Client()
	srv := testserver.New(t, &testserver.Service{Handler: tenantHandler}, grpc.ChainUnaryInterceptor(
		authenticate, idempotency.UnaryServerInterceptor(redisstore.New(rs.Client()), idempotency.WithScope(tenantScope))))
	client := srv.Client(t)
	hostile := []string{
		"../../etc/passwd", "{slot}", "{slot}x", "idempotency:foo", "idempotency:", "*", "?", "[a-z]",
		"a:b:c", `"quoted"`, "%2e%2e%2f", "SET", "FLUSHALL", "key\\", strings.Repeat("z", idempotency.MaxKeyLen),
	}
	for _, key := range hostile {
		for _, token := range []string{"tok-a", "tok-b"} {
			if _, err := client.Do(asTenant(ctx, token, key), &testingv1.DoRequest{Payload: key}); err != nil {
				t.Fatalf("key %q: %v", key, err)
			}
		}
	}
	keys := redisKeys(ctx, t, direct, "")
	if len(keys) != 2*len(hostile) {
		t.Fatalf("Redis holds %d keys, want %d (one per key and tenant)", len(keys), 2*len(hostile))
	}
	for _, k := range keys {
		if !hashedKey.MatchString(k) {
			t.Fatalf("Redis key %q is not %s + 43-character base64url", k, redisstore.DefaultPrefix)
		}
		hash := strings.TrimPrefix(k, redisstore.DefaultPrefix)
		for _, key := range hostile {
			if len(key) >= 4 && strings.Contains(hash, key) {
				t.Fatalf("Redis key %q contains client key text %q", k, key)
			}
		}
		// The stored entry holds no client key either, outside the
		// stored outcome (whose response echoes the payload).
		v, err := direct.Get(ctx, k).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		header := entryHeader(t, v)
		for _, key := range []string{"../../etc/passwd", "idempotency:foo", "FLUSHALL"} {
			if bytes.Contains(header, []byte(key)) {
				t.Fatalf("the entry of %q holds client key text %q before its data", k, key)
			}
		}
	}
}

// entryHeader returns the part of a redisstore entry (layout 2: version 2,
// state, token length, token, 2-byte fingerprint length, fingerprint,
// data) before its data.
func entryHeader(t *testing.T, v []byte) []byte {
	t.Helper()
	if len(v) < 5 || v[0] != 2 || len(v) < 5+int(v[2]) {
		t.Fatalf("value %q is not a redisstore entry", v)
	}
	tl := int(v[2])
	n := 5 + tl + (int(v[3+tl])<<8 | int(v[4+tl]))
	if len(v) < n {
		t.Fatalf("value %q is shorter than its header", v)
	}
	return v[:n]
}

// TestIsolationRedisACL runs the store as a Redis ACL user limited to the
// store's key prefix and the commands it needs, as SECURITY.md advises:
// calls execute and replay, and the user cannot touch other keys.
func TestIsolationRedisACL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rs := redistest.StartServer(t)
	admin := rs.Client()
	err := admin.Do(ctx, "ACL", "SETUSER", "idem", "on", ">s3cret", "resetkeys", "~"+redisstore.DefaultPrefix+"*", "-@all",
		"+set", "+get", "+evalsha", "+eval", "+script|load", "+type", "+hset", "+hmget", "+del", "+pexpire",
		"+pexpiretime", "+pexpireat", "+wait", "+ping", "+hello").Err()
	if err != nil {
		t.Fatal(err)
	}
	opts := rs.Options()
	opts.Username, opts.Password = "idem", "s3cret"
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	st := redisstore.New(rdb)
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(st)))
	client := srv.Client(t)
	for i := range 2 {
		resp, err := client.Do(withKey(ctx, "k-acl"), &testingv1.DoRequest{Payload: "p"})
		if err != nil || resp.GetExecution() != 1 {
			t.Fatalf("call %d as the restricted user: %v, %v; want execution 1", i+1, resp, err)
		}
	}
	if err := rdb.Set(ctx, "other:key", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET outside the prefix: %v, want NOPERM", err)
	}
}
