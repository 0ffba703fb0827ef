package idempotency_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// The rig of the sealed-record tests (sealed_*_test.go): one
// idempotency.Server over a store, reached through its four entry points
// (the unary interceptor, the stream interceptor, Do, the HTTP
// middleware), each answering with secrets that no store may hold once
// the server seals its records (WithSealing).

// sealedDoOp is the operation of the Do entry point.
const sealedDoOp = "payments.charge"

// sealedHTTPOp is the operation under which httpidempotency keeps its
// keys by default.
const sealedHTTPOp = "http"

// sealedKey is a sealing key whose secret is b repeated.
func sealedKey(id string, b byte) idempotency.SealingKey {
	return idempotency.SealingKey{ID: id, Secret: bytes.Repeat([]byte{b}, idempotency.SealingKeySize)}
}

// sealedWith is the option that seals with primary, still opening what
// the older keys sealed.
func sealedWith(primary idempotency.SealingKey, older ...idempotency.SealingKey) idempotency.ServerOption {
	return idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(primary, older...)})
}

// sealedAnswer is what one call of an entry point got: its answer as
// bytes (everything a replay must repeat), whether it was marked a replay,
// and whether it was refused as a corrupt record
// (IDEMPOTENCY_RECORD_CORRUPT: INTERNAL on gRPC, ErrRecordCorrupt from
// Do, 500 on HTTP); err is any other failure.
type sealedAnswer struct {
	bytes    []byte
	replayed bool
	corrupt  bool
	err      error
}

// sealedEntry is one entry point of a [sealedRig].
type sealedEntry struct {
	name string
	// op is the method or operation that [idempotency.Server.StoreKey]
	// takes for the entry's keys.
	op string
	// request is the request the entry fingerprints, nil for HTTP (whose
	// request message the middleware builds).
	request proto.Message
	// secrets are strings the entry's answer carries.
	secrets []string
	// call calls the entry with key.
	call func(ctx context.Context, key string) sealedAnswer
	// runs counts the executions of the entry's handler.
	runs func() int64
}

// sealedRig is one Server over a store with its four entry points.
type sealedRig struct {
	srv     *idempotency.Server
	entries []sealedEntry
}

// newSealedRig serves the four entry points behind one Server over st
// with opts; tag goes into every secret, so that two rigs' answers
// differ. Everything stops, and the Server closes, when the test ends.
func newSealedRig(t *testing.T, st store.Store, tag string, opts ...idempotency.ServerOption) *sealedRig {
	t.Helper()
	unarySecret, unaryHeader := "card-4111-1111-1111-1111 "+tag, "holder Jane Roe "+tag
	streamSecret := "iban-DE89-3704-0044-0532 " + tag
	doSecret, httpSecret, httpHeader := "ssn-078-05-1120 "+tag, "sk_live_51Hx9 "+tag, "receipt Q-7781 "+tag

	unary := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if err := grpc.SetHeader(ctx, metadata.Pairs("x-holder", unaryHeader)); err != nil {
			return nil, err
		}
		return &testingv1.DoResponse{Payload: unarySecret, Amount: req.GetAmount(), Blob: []byte(unarySecret)}, nil
	}
	streams := &streamtest.Streams{}
	r := testkit.Serve(t, testkit.Config{Handler: unary, Store: st, Options: opts, Register: func(s grpc.ServiceRegistrar) {
		testingv1.RegisterStreamServiceServer(s, streams)
	}})
	unaryClient := r.Client(t)
	streamClient := testingv1.NewStreamServiceClient(r.Dial(t))

	var doRuns atomic.Int64
	doReq := &testingv1.DoRequest{Payload: "charge", Amount: 4200}
	var httpRuns atomic.Int64
	ts := httptest.NewServer(httpidempotency.Middleware(r.Idempotency)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := httpRuns.Add(1)
		w.Header().Set("X-Receipt", httpHeader)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"token":%q,"run":%d}`, httpSecret, n)
	})))
	t.Cleanup(ts.Close)
	unaryReq := &testingv1.DoRequest{Payload: "charge", Amount: 4200}
	streamReq := &testingv1.DoRequest{Payload: streamSecret, Amount: 3}

	return &sealedRig{srv: r.Idempotency, entries: []sealedEntry{
		{
			name: "unary", op: testingv1.TestService_Do_FullMethodName, request: unaryReq,
			secrets: []string{unarySecret, unaryHeader},
			call: func(ctx context.Context, key string) sealedAnswer {
				var header metadata.MD
				resp, err := unaryClient.Do(withKey(ctx, key), unaryReq, grpc.Header(&header))
				if err != nil {
					return sealedFailure(err)
				}
				b, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
				b = append(b, strings.Join(header.Get("x-holder"), ",")...)
				return sealedAnswer{bytes: b, replayed: idempotency.Replayed(header, nil), err: err}
			},
			runs: r.Service.Executions,
		},
		{
			name: "stream", op: streamtest.DownloadMethod, request: streamReq,
			secrets: []string{streamSecret},
			call: func(ctx context.Context, key string) sealedAnswer {
				return sealedDownload(ctx, streamClient, key, streamReq)
			},
			runs: streams.Executions,
		},
		{
			name: "do", op: sealedDoOp, request: doReq,
			secrets: []string{doSecret},
			call: func(ctx context.Context, key string) sealedAnswer {
				resp, replayed, err := idempotency.Do(ctx, r.Idempotency, sealedDoOp, key, doReq, func(context.Context) (*testingv1.DoResponse, error) {
					return &testingv1.DoResponse{Payload: doSecret, Amount: doReq.GetAmount(), Execution: doRuns.Add(1)}, nil
				})
				if errors.Is(err, idempotency.ErrRecordCorrupt) {
					return sealedAnswer{corrupt: true}
				}
				if err != nil {
					return sealedAnswer{err: err}
				}
				b, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
				return sealedAnswer{bytes: b, replayed: replayed, err: err}
			},
			runs: doRuns.Load,
		},
		{
			name: "http", op: sealedHTTPOp,
			secrets: []string{httpSecret, httpHeader},
			call: func(ctx context.Context, key string) sealedAnswer {
				return sealedPost(ctx, ts, key)
			},
			runs: httpRuns.Load,
		},
	}}
}

// sealedFailure is the sealedAnswer of a failed gRPC call.
func sealedFailure(err error) sealedAnswer {
	if status.Code(err) == codes.Internal && testkit.ClientReason(err) == idempotency.ErrRecordCorrupt.Reason {
		return sealedAnswer{corrupt: true}
	}
	return sealedAnswer{err: err}
}

// sealedDownload calls Download with key and reads the whole stream: its answer
// is each message's encoding, length first, then the header the handler
// set.
func sealedDownload(ctx context.Context, c testingv1.StreamServiceClient, key string, req *testingv1.DoRequest) sealedAnswer {
	stream, err := c.Download(withKey(ctx, key), req)
	if err != nil {
		return sealedFailure(err)
	}
	var b []byte
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sealedFailure(err)
		}
		enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return sealedAnswer{err: err}
		}
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	header, err := stream.Header()
	if err != nil {
		return sealedAnswer{err: err}
	}
	b = append(b, strings.Join(header.Get("x-execution"), ",")...)
	return sealedAnswer{bytes: b, replayed: idempotency.Replayed(header, stream.Trailer())}
}

// sealedPost posts a charge with key to ts: its answer is the status, the
// headers the handler sets and the body.
func sealedPost(ctx context.Context, ts *httptest.Server, key string) sealedAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/charges", strings.NewReader(`{"amount":4200}`))
	if err != nil {
		return sealedAnswer{err: err}
	}
	req.Header.Set(httpidempotency.KeyHeader, key)
	resp, err := ts.Client().Do(req)
	if err != nil {
		return sealedAnswer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return sealedAnswer{err: err}
	}
	if resp.StatusCode == http.StatusInternalServerError {
		var p httpidempotency.Problem
		if json.Unmarshal(body, &p) == nil && p.Reason == idempotency.ErrRecordCorrupt.Reason {
			return sealedAnswer{corrupt: true}
		}
	}
	if resp.StatusCode != http.StatusCreated {
		return sealedAnswer{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)}
	}
	b := []byte(strconv.Itoa(resp.StatusCode) + "\n" + resp.Header.Get("X-Receipt") + "\n" + resp.Header.Get("Content-Type") + "\n")
	return sealedAnswer{bytes: append(b, body...), replayed: resp.Header.Get(httpidempotency.ReplayedHeader) == "true"}
}

// sealedLookup returns the live entry of e's key in the store behind srv, read
// through the store's Inspector.
func sealedLookup(t *testing.T, srv *idempotency.Server, e sealedEntry, key string) store.Info {
	t.Helper()
	sk, err := srv.StoreKey(e.op, "", key)
	if err != nil {
		t.Fatal(err)
	}
	in, ok := srv.Inspector()
	if !ok {
		t.Fatal("the store is not a store.Inspector")
	}
	info, err := in.Lookup(t.Context(), sk)
	if err != nil {
		t.Fatalf("%s: lookup %s: %v", e.name, key, err)
	}
	return info
}

// sealedRewrite replaces the entry under storeKey with a completed one
// holding fingerprint and data, through the store's own operations, as
// whoever can write to the store could.
func sealedRewrite(t *testing.T, st store.Store, storeKey string, fingerprint, data []byte) {
	t.Helper()
	ctx := t.Context()
	in, ok := st.(store.Inspector)
	if !ok {
		t.Fatal("the store is not a store.Inspector")
	}
	if _, err := in.Purge(ctx, storeKey, store.PurgeOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	cl, err := st.Claim(ctx, storeKey, fingerprint, time.Minute, store.ClaimOptions{})
	if err != nil || !cl.Won() {
		t.Fatalf("claim %s: %v (won %v)", storeKey, err, cl.Won())
	}
	if err := st.Complete(ctx, storeKey, cl.Token, data, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// wantSealedFingerprint fails the test unless fp is a fingerprint keyed by
// keyID (0x02, the ID's length, the ID, an HMAC-SHA256) that does not hold
// unkeyed's digest.
func wantSealedFingerprint(t *testing.T, what string, fp, unkeyed []byte, keyID string) {
	t.Helper()
	if len(fp) != 2+len(keyID)+32 || fp[0] != 2 || int(fp[1]) != len(keyID) || string(fp[2:2+len(keyID)]) != keyID {
		t.Errorf("%s: stored fingerprint %x is not one keyed by %s", what, fp, keyID)
	}
	if len(unkeyed) < 2 || bytes.Contains(fp, unkeyed[1:]) {
		t.Errorf("%s: stored fingerprint %x holds the unkeyed one %x", what, fp, unkeyed)
	}
}

// wantNoSealedSecret fails the test when b, bytes a store holds, contains any
// of secrets.
func wantNoSealedSecret(t *testing.T, what string, b []byte, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds the secret %q", what, s)
		}
	}
}
