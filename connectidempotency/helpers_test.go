package connectidempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// memServer returns an idempotency server over a new memory store.
func memServer(t *testing.T, opts ...idempotency.ServerOption) (*idempotency.Server, *memorystore.Store) {
	t.Helper()
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	return idempotency.NewServer(mem, opts...), mem
}

// rig is the TestService and the StreamService behind the handler
// interceptor over one protocol, and their clients.
type rig struct {
	*connecttest.Server
	unary   testingv1connect.TestServiceClient
	streams testingv1connect.StreamServiceClient
}

// setup configures a rig.
type setup struct {
	srv     *idempotency.Server
	handler connecttest.Handler  // the TestService's; counts runs when nil
	streams *connecttest.Streams // the StreamService's; a new one when nil
	// streamHandler, when set, is the StreamService's instead of streams.
	streamHandler testingv1connect.StreamServiceHandler
	// handlerOpts are the handlers' options, after the interceptor.
	handlerOpts []connect.HandlerOption
	// clientOpts are the clients' options, after the protocol's.
	clientOpts []connect.ClientOption
	proxied    bool // behind a fault proxy
}

func newRig(t *testing.T, p connecttest.Protocol, s setup) *rig {
	t.Helper()
	if s.streams == nil {
		s.streams = &connecttest.Streams{}
	}
	opts := append([]connect.HandlerOption{connect.WithInterceptors(connectidempotency.NewInterceptor(s.srv))}, s.handlerOpts...)
	mux := http.NewServeMux()
	mux.Handle(testingv1connect.NewTestServiceHandler(&connecttest.TestService{Handler: s.handler}, opts...))
	var streams testingv1connect.StreamServiceHandler = s.streams
	if s.streamHandler != nil {
		streams = s.streamHandler
	}
	mux.Handle(testingv1connect.NewStreamServiceHandler(streams, opts...))
	serve := connecttest.Serve
	if s.proxied {
		serve = connecttest.ServeProxied
	}
	srv := serve(t, mux, p)
	copts := append(slices.Clone(p.Options), s.clientOpts...)
	return &rig{
		Server:  srv,
		unary:   testingv1connect.NewTestServiceClient(srv.HTTP, srv.URL, copts...),
		streams: testingv1connect.NewStreamServiceClient(srv.HTTP, srv.URL, copts...),
	}
}

// forEachProtocol runs f as a parallel subtest for each protocol.
func forEachProtocol(t *testing.T, f func(t *testing.T, p connecttest.Protocol)) {
	t.Helper()
	for _, p := range connecttest.Protocols {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			f(t, p)
		})
	}
}

// runs counts a handler's runs.
type runs struct {
	n    atomic.Int64
	mu   sync.Mutex
	keys []string // the key header of each run
}

func (r *runs) count() int64 { return r.n.Load() }

// handler answers with the request's payload and the run's number.
func (r *runs) handler(ctx context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	n := r.n.Add(1)
	r.mu.Lock()
	r.keys = append(r.keys, req.Header().Get(idempotency.MetadataKey))
	r.mu.Unlock()
	return connect.NewResponse(&testingv1.DoResponse{Payload: req.Msg.GetPayload(), Execution: n}), nil
}

// request returns a request with payload and, when key is not empty, the
// key header.
func request(payload, key string) *connect.Request[testingv1.DoRequest] {
	req := connect.NewRequest(&testingv1.DoRequest{Payload: payload})
	if key != "" {
		req.Header().Set(idempotency.MetadataKey, key)
	}
	return req
}

// wantCode fails the test unless err is a *connect.Error of code with the
// library's reason (none when reason is "").
func wantCode(t *testing.T, err error, code connect.Code, reason string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *connect.Error of %v", err, err, code)
	}
	if ce.Code() != code {
		t.Fatalf("code %v (%v), want %v", ce.Code(), err, code)
	}
	ei, _ := connecttest.ErrorInfo(ce)
	if got := ei.GetReason(); got != reason {
		t.Fatalf("reason %q, want %q (%v)", got, reason, err)
	}
	return ce
}

// marshal is m's deterministic encoding.
func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wire records the raw HTTP answers a client gets: the status, the
// headers, the body as the server sent it (before connect-go decodes it)
// and the HTTP trailers.
type wire struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  []*rawAnswer
}

type rawAnswer struct {
	status          int
	header, trailer http.Header
	body            bytes.Buffer
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	a := &rawAnswer{status: resp.StatusCode, header: resp.Header.Clone()}
	resp.Body = &tee{ReadCloser: resp.Body, a: a, resp: resp}
	w.mu.Lock()
	w.got = append(w.got, a)
	w.mu.Unlock()
	return resp, nil
}

// answers returns the raw answers recorded so far.
func (w *wire) answers() []*rawAnswer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

type tee struct {
	io.ReadCloser
	a    *rawAnswer
	resp *http.Response
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.a.body.Write(p[:n])
	if err == io.EOF {
		t.a.trailer = t.resp.Trailer.Clone()
	}
	return n, err
}

// recordWire makes r's clients record their raw answers.
func (r *rig) recordWire(t *testing.T, p connecttest.Protocol, opts ...connect.ClientOption) *wire {
	t.Helper()
	w := &wire{base: r.HTTP.Transport}
	hc := &http.Client{Transport: w}
	copts := append(slices.Clone(p.Options), opts...)
	r.unary = testingv1connect.NewTestServiceClient(hc, r.URL, copts...)
	r.streams = testingv1connect.NewStreamServiceClient(hc, r.URL, copts...)
	return w
}

// sameWire fails the test unless a replay (b) is the original (a) on the
// wire: the same status, body and HTTP trailers, and the same headers but
// for those of the moment (Date), and the replay marker, which only b has.
func sameWire(t *testing.T, a, b *rawAnswer) {
	t.Helper()
	if a.status != b.status {
		t.Errorf("HTTP status: replay %d, original %d", b.status, a.status)
	}
	if !bytes.Equal(a.body.Bytes(), b.body.Bytes()) {
		t.Errorf("body: replay %q, original %q", b.body.Bytes(), a.body.Bytes())
	}
	ha, hb := a.header.Clone(), b.header.Clone()
	for _, h := range []http.Header{ha, hb} {
		h.Del("Date")
	}
	if !connectidempotency.Replayed(hb) || connectidempotency.Replayed(ha) {
		t.Errorf("replay marker in the header: replay %v, original %v", connectidempotency.Replayed(hb), connectidempotency.Replayed(ha))
	}
	hb.Del(idempotency.ReplayedKey)
	hb.Del(connectidempotency.ReplayedHeader)
	if !maps.EqualFunc(ha, hb, slices.Equal) {
		t.Errorf("header: replay %v, original %v", hb, ha)
	}
	if !maps.EqualFunc(a.trailer, b.trailer, slices.Equal) {
		t.Errorf("HTTP trailer: replay %v, original %v", b.trailer, a.trailer)
	}
}
