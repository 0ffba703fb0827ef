package idempotency_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// fuzzMethod is the method the fuzz targets call.
const fuzzMethod = testingv1.TestService_Do_FullMethodName

// FuzzKeyMetadata runs arbitrary metadata values through the server
// interceptor, called directly so that bytes grpc-go would refuse to send
// reach it too. It never panics; a request is refused exactly when it
// carries more than one key or a key ValidateKey refuses, and every
// refusal is INVALID_ARGUMENT with an ErrorInfo reason.
func FuzzKeyMetadata(f *testing.F) {
	for _, seed := range []struct {
		a, b string
		n    uint8
	}{
		{"k-1", "", 1}, {"", "", 1}, {"a\x00b", "", 1}, {"k", "k", 2}, {"k", "other", 2},
		{"", "", 0}, {strings.Repeat("k", 255), "", 1}, {strings.Repeat("k", 256), "", 1},
		{"ключ", "\xff", 2}, {"a\r\nx: y", "", 1}, {"~!", "\x7f", 3},
	} {
		f.Add(seed.a, seed.b, seed.n)
	}
	f.Fuzz(func(t *testing.T, a, b string, n uint8) {
		mem := memorystore.New(memorystore.WithSweepInterval(0))
		defer mem.Close()
		intercept := idempotency.UnaryServerInterceptor(mem)
		md := metadata.MD{"x-other": {b, a}}
		switch n % 4 {
		case 1:
			md[idempotency.MetadataKey] = []string{a}
		case 2:
			md[idempotency.MetadataKey] = []string{a, b}
		case 3:
			md[idempotency.MetadataKey] = []string{a, a, a}
		}
		ran := 0
		info := &grpc.UnaryServerInfo{FullMethod: fuzzMethod}
		// The request is valid (grpc-go's codec refuses invalid UTF-8 in a
		// string field before any interceptor runs); only metadata is wild.
		req := &testingv1.DoRequest{Payload: strings.ToValidUTF8(b, "?")}
		_, err := intercept(metadata.NewIncomingContext(context.Background(), md), req, info,
			func(context.Context, any) (any, error) {
				ran++
				return &testingv1.DoResponse{}, nil
			})
		keys := md[idempotency.MetadataKey]
		wantOK := len(keys) == 0 || (len(keys) == 1 && idempotency.ValidateKey(keys[0]) == nil)
		if wantOK {
			if err != nil || ran != 1 {
				t.Fatalf("keys %q: %v, ran %d; want one execution", keys, err, ran)
			}
			return
		}
		if ran != 0 {
			t.Fatalf("keys %q: handler ran for a refused key", keys)
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("keys %q: %v, want INVALID_ARGUMENT", keys, err)
		}
		if ei, _ := errorInfo(err); ei.GetDomain() != idempotency.ErrorDomain || ei.GetReason() != idempotency.ErrKeyInvalid.Reason {
			t.Fatalf("keys %q: ErrorInfo %v, want %s", keys, ei, idempotency.ErrKeyInvalid.Reason)
		}
		if msg := status.Convert(err).Message(); len(a) >= 8 && strings.Contains(msg, a) {
			t.Fatalf("error message %q echoes the key", msg)
		}
	})
}

// replayTarget is the request FuzzReplay replays, its fingerprint and the
// store key the interceptor uses for it.
type replayTarget struct {
	req      *testingv1.DoRequest
	fp       []byte
	storeKey string
	good     []byte // a record the interceptor itself stored
}

const replayClientKey = "k-fuzz-replay"

// newReplayTarget runs one real call to learn the store key (from the
// faultstore's recorded Claim) and a genuine record.
func newReplayTarget(f *testing.F) replayTarget {
	f.Helper()
	req := &testingv1.DoRequest{Payload: "p", Amount: 7}
	fp, err := idempotency.Fingerprint(fuzzMethod, req)
	if err != nil {
		f.Fatal(err)
	}
	mem := memorystore.New(memorystore.WithSweepInterval(0))
	defer mem.Close()
	fs := faultstore.New(mem)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idempotency.MetadataKey, replayClientKey))
	_, err = idempotency.UnaryServerInterceptor(fs)(ctx, req, &grpc.UnaryServerInfo{FullMethod: fuzzMethod},
		func(context.Context, any) (any, error) {
			return &testingv1.DoResponse{Payload: "stored", Execution: 1}, nil
		})
	if err != nil {
		f.Fatal(err)
	}
	key := fs.Calls()[0].Key
	cl, err := mem.Claim(context.Background(), key, fp, time.Minute, store.ClaimOptions{})
	if err != nil || cl.Won() {
		f.Fatalf("reading back the record: %v, won %v", err, cl.Won())
	}
	return replayTarget{req: req, fp: fp, storeKey: key, good: bytes.Clone(cl.Existing.Data)}
}

// FuzzReplay stores fuzzed bytes as the completed outcome of a real
// memory-store entry, under the store key and fingerprint the interceptor
// uses, and replays it. The interceptor never panics and never runs the
// handler; it answers INTERNAL IDEMPOTENCY_RECORD_CORRUPT for what
// internal/record cannot decode, and otherwise a faithful replay of the
// record: its response, its status, or IDEMPOTENCY_RESPONSE_NOT_RETAINED.
func FuzzReplay(f *testing.F) {
	tg := newReplayTarget(f)
	f.Add(tg.good)
	f.Add([]byte{})
	f.Add(faultstore.Garbage)
	for _, rec := range []*recordv1.Record{
		{Version: record.Version, State: recordv1.State_STATE_COMPLETED, Fingerprint: tg.fp, Outcome: recordv1.Outcome_OUTCOME_ERROR,
			Status: &recordv1.Status{Code: int32(codes.NotFound), Message: []byte("gone \xff")}},
		{Version: record.Version, State: recordv1.State_STATE_COMPLETED, Fingerprint: tg.fp, Outcome: recordv1.Outcome_OUTCOME_NOT_RETAINED},
		{Version: record.Version, State: recordv1.State_STATE_COMPLETED, Fingerprint: tg.fp, Outcome: recordv1.Outcome_OUTCOME_RESPONSE,
			ResponseType: "google.protobuf.Empty"},
		{Version: record.Version + 1, State: recordv1.State_STATE_COMPLETED, Fingerprint: tg.fp},
	} {
		b, err := record.Encode(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		mem := memorystore.New(memorystore.WithSweepInterval(0))
		defer mem.Close()
		cl, err := mem.Claim(ctx, tg.storeKey, tg.fp, time.Minute, store.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Complete(ctx, tg.storeKey, cl.Token, data, time.Hour); err != nil {
			t.Fatal(err)
		}
		ictx := metadata.NewIncomingContext(ctx, metadata.Pairs(idempotency.MetadataKey, replayClientKey))
		resp, err := idempotency.UnaryServerInterceptor(mem)(ictx, tg.req, &grpc.UnaryServerInfo{FullMethod: fuzzMethod},
			func(context.Context, any) (any, error) {
				t.Fatal("the handler ran for a completed key")
				return nil, nil
			})
		checkReplay(t, data, tg.fp, resp, err)
	})
}

// checkReplay fails the test unless resp, err is what replaying data
// should give.
func checkReplay(t *testing.T, data, fp []byte, resp any, err error) {
	t.Helper()
	corrupt := func() bool {
		ei, _ := errorInfo(err)
		return status.Code(err) == codes.Internal && ei.GetReason() == idempotency.ErrRecordCorrupt.Reason
	}
	rec, derr := record.Decode(data, fp)
	if derr != nil {
		if !corrupt() {
			t.Fatalf("undecodable record (%v) replayed as %v, %v; want INTERNAL %s", derr, resp, err, idempotency.ErrRecordCorrupt.Reason)
		}
		return
	}
	switch rec.GetOutcome() {
	case recordv1.Outcome_OUTCOME_ERROR:
		st := status.Convert(err)
		if err == nil || int32(st.Code()) != rec.GetStatus().GetCode() || st.Message() != string(rec.GetStatus().GetMessage()) {
			t.Fatalf("error record %v replayed as %v, %v", rec.GetStatus(), resp, err)
		}
	case recordv1.Outcome_OUTCOME_NOT_RETAINED:
		if ei, _ := errorInfo(err); status.Code(err) != codes.FailedPrecondition || ei.GetReason() != idempotency.ErrResponseNotRetained.Reason {
			t.Fatalf("not-retained record replayed as %v, %v", resp, err)
		}
	case recordv1.Outcome_OUTCOME_RESPONSE:
		want := &testingv1.DoResponse{}
		if rec.GetResponseType() != string(want.ProtoReflect().Descriptor().FullName()) || proto.Unmarshal(rec.GetResponse(), want) != nil {
			if !corrupt() {
				t.Fatalf("response record of type %q replayed as %v, %v; want RECORD_CORRUPT", rec.GetResponseType(), resp, err)
			}
			return
		}
		got, ok := resp.(*testingv1.DoResponse)
		if err != nil || !ok || !proto.Equal(got, want) {
			t.Fatalf("response record replayed as %v, %v; want %v", resp, err, want)
		}
	default:
		t.Fatalf("record.Decode admitted outcome %v", rec.GetOutcome())
	}
}

// FuzzFingerprint decodes two requests from fuzzed bytes and checks the
// fingerprint: equal messages (however encoded) give equal fingerprints,
// different messages give different ones, and the method name is bound in.
func FuzzFingerprint(f *testing.F) {
	a, _ := proto.Marshal(&testingv1.DoRequest{Payload: "p", Amount: 1})
	b, _ := proto.Marshal(&testingv1.DoRequest{Payload: "p", Amount: 2})
	reordered := []byte{0x10, 0x01, 0x0a, 0x01, 'p'}               // amount before payload
	overwritten := []byte{0x10, 0x05, 0x0a, 0x01, 'p', 0x10, 0x01} // amount 5, then 1: last wins
	unknown := append(bytes.Clone(a), 0xf8, 0x01, 0x01)            // field 31, varint 1
	for _, s := range []struct {
		a, b   []byte
		m1, m2 string
	}{
		{a, a, fuzzMethod, fuzzMethod}, {a, b, fuzzMethod, fuzzMethod}, {a, reordered, fuzzMethod, fuzzMethod},
		{a, overwritten, fuzzMethod, fuzzMethod}, {a, unknown, fuzzMethod, fuzzMethod}, {a, a, fuzzMethod, "/x.Y/Z"},
		{nil, nil, "", "a"}, {nil, []byte{0x22, 0x00}, "/a", "/a"},
	} {
		f.Add(s.a, s.b, s.m1, s.m2)
	}
	f.Fuzz(func(t *testing.T, rawA, rawB []byte, m1, m2 string) {
		var ra, rb testingv1.DoRequest
		if proto.Unmarshal(rawA, &ra) != nil || proto.Unmarshal(rawB, &rb) != nil {
			return
		}
		fa, err := idempotency.Fingerprint(m1, &ra)
		if err != nil {
			t.Fatalf("fingerprint of a decoded request: %v", err)
		}
		if len(fa) != 33 || fa[0] != 1 {
			t.Fatalf("fingerprint %x: want a version byte 1 and 32 bytes of SHA-256", fa)
		}
		again, _ := idempotency.Fingerprint(m1, proto.Clone(&ra))
		fb, _ := idempotency.Fingerprint(m1, &rb)
		other, _ := idempotency.Fingerprint(m2, &ra)
		switch {
		case !bytes.Equal(fa, again):
			t.Fatal("equal messages (a clone) gave different fingerprints")
		case proto.Equal(&ra, &rb) != bytes.Equal(fa, fb):
			t.Fatalf("proto.Equal = %v but fingerprints equal = %v for %v and %v", proto.Equal(&ra, &rb), bytes.Equal(fa, fb), &ra, &rb)
		case (m1 == m2) != bytes.Equal(fa, other):
			t.Fatalf("methods %q and %q: fingerprints equal = %v", m1, m2, bytes.Equal(fa, other))
		}
	})
}
