// Package admintest runs the cases of the admin service
// (idempotency.admin.v1.AdminService, package admin) over real gRPC
// servers and a real store: the test service and the stream service
// behind the interceptors of one idempotency.Server, and the admin service
// of that server on a listener of its own, as the guide registers it. [Run]
// takes the store to test on, as internal/test/behaviourtest does: the admin
// package runs it on the memory store, the integration module on Redis,
// PostgreSQL and MySQL.
package admintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// Operators, as the rig's authorization function knows them from the
// "x-operator" metadata of an admin call.
const (
	// Alice may call everything.
	Alice = "alice"
	// Reader may call everything but PurgeKey and ResolveKey.
	Reader = "reader"
	// Anonymous is refused with UNAUTHENTICATED, a status the function
	// returns itself.
	Anonymous = "anonymous"
)

// Payloads the rig's handler answers in its own way; any other is echoed.
const (
	// payloadRefuse is answered FAILED_PRECONDITION with a BadRequest
	// detail, a stored error.
	payloadRefuse = "refuse"
	// payloadBlock waits until the rig releases its handlers.
	payloadBlock = "block"
)

// rig is one server under test: the test service and the stream service
// behind an idempotency.Server over one store, and its admin service on a
// listener of its own.
type rig struct {
	*testkit.Rig
	streams *streamtest.Streams
	client  testingv1.TestServiceClient
	admin   adminv1.AdminServiceClient
	// adminConn is the admin client's connection.
	adminConn *grpc.ClientConn
	logs      *logLines
	release   chan struct{} // closed to release the handlers of payloadBlock
	once      sync.Once
}

// newRig starts a rig over st, with opts for its idempotency.Server.
func newRig(t *testing.T, st store.Store, opts ...idempotency.ServerOption) *rig {
	t.Helper()
	r := &rig{streams: &streamtest.Streams{}, logs: &logLines{}, release: make(chan struct{})}
	t.Cleanup(r.unblock)
	r.Rig = testkit.Serve(t, testkit.Config{
		Store:    st,
		Options:  opts,
		Handler:  r.handle,
		Register: func(s grpc.ServiceRegistrar) { testingv1.RegisterStreamServiceServer(s, r.streams) },
	})
	r.client = r.Client(t)
	svc := admin.NewService(r.Idempotency, authorize, admin.WithLogger(slog.New(slog.NewJSONHandler(r.logs, nil))))
	lis := testserver.Start(t, func(s grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(s, svc) })
	r.adminConn = lis.Dial(t)
	r.admin = adminv1.NewAdminServiceClient(r.adminConn)
	return r
}

// unblock releases the handlers of payloadBlock.
func (r *rig) unblock() { r.once.Do(func() { close(r.release) }) }

// handle answers the test service's calls: it sets a header and a binary
// trailer, then answers by payload.
func (r *rig) handle(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-order", "o-"+req.GetPayload()))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trace-bin", "\xff\x00\x01"))
	switch req.GetPayload() {
	case payloadRefuse:
		st, err := status.New(codes.FailedPrecondition, "amount over the limit").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "amount", Description: "too big"}},
		})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	case payloadBlock:
		<-r.release
	}
	return testserver.Echo(ctx, method, req)
}

// authorize lets Alice call everything and Reader everything but
// PurgeKey and ResolveKey, answers Anonymous UNAUTHENTICATED, and refuses anyone else.
func authorize(ctx context.Context, method string) (string, error) {
	who := metadata.ValueFromIncomingContext(ctx, "x-operator")
	switch {
	case len(who) != 1:
	case who[0] == Alice:
		return Alice, nil
	case who[0] == Reader && method != adminv1.AdminService_PurgeKey_FullMethodName && method != adminv1.AdminService_ResolveKey_FullMethodName:
		return Reader, nil
	case who[0] == Anonymous:
		return "", status.Error(codes.Unauthenticated, "no credentials")
	}
	return "", errors.New("not an operator")
}

// as returns ctx with who as the admin call's operator.
func as(ctx context.Context, who string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-operator", who)
}

// do makes one Do call with key and payload.
func (r *rig) do(t *testing.T, key, payload string) (*testingv1.DoResponse, error) {
	return r.client.Do(testkit.WithKey(t.Context(), key), &testingv1.DoRequest{Payload: payload, Amount: 7})
}

// call is [rig.do] that fails the test on an error unless the payload is
// payloadRefuse.
func (r *rig) call(t *testing.T, key, payload string) *testingv1.DoResponse {
	t.Helper()
	resp, err := r.do(t, key, payload)
	if err != nil && payload != payloadRefuse {
		t.Fatalf("Do(%s) = %v", key, err)
	}
	return resp
}

// answer is the outcome of a call made in a goroutine.
type answer struct {
	resp *testingv1.DoResponse
	err  error
}

// start makes a call with key and payload in a goroutine, and returns the
// channel its answer arrives on.
func (r *rig) start(t *testing.T, key, payload string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		resp, err := r.do(t, key, payload)
		ch <- answer{resp, err}
	}()
	return ch
}

// wait returns the response of a call started with [rig.start], and fails
// the test on its error.
func wait(t *testing.T, ch <-chan answer) *testingv1.DoResponse {
	t.Helper()
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.resp
}

// storeKey returns the store key of the test service's Do with key.
func (r *rig) storeKey(t *testing.T, key string) string {
	t.Helper()
	k, err := r.Idempotency.StoreKey(testingv1.TestService_Do_FullMethodName, "", key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// get returns the entry of the test service's Do with key, looked up by
// its client key.
func (r *rig) get(t *testing.T, key string) *adminv1.Entry {
	t.Helper()
	resp, err := r.admin.GetKey(as(t.Context(), Alice), &adminv1.GetKeyRequest{Key: clientKey(key)})
	if err != nil {
		t.Fatalf("GetKey(%s) = %v", key, err)
	}
	return resp.GetEntry()
}

// clientKey names the test service's Do with key.
func clientKey(key string) *adminv1.GetKeyRequest_ClientKey {
	return &adminv1.GetKeyRequest_ClientKey{ClientKey: &adminv1.ClientKey{Name: testingv1.TestService_Do_FullMethodName, Key: key}}
}

// wantCode fails the test unless err has code.
func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code = %v (%v), want %v", got, err, code)
	}
}

// logLines records the JSON lines of a slog handler.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the records logged with message msg, each as its
// attributes.
func (l *logLines) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// text returns everything logged.
func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// since returns how long ago ts was, for the times of an entry.
func since(ts interface{ AsTime() time.Time }) time.Duration { return time.Since(ts.AsTime()) }
