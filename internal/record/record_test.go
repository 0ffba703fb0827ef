package record_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/google/go-cmp/cmp"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

var fp = []byte{1, 2, 3}

func valid() *recordv1.Record {
	detail, _ := anypb.New(timestamppb.Now())
	return &recordv1.Record{
		Version:      record.Version,
		State:        recordv1.State_STATE_COMPLETED,
		Fingerprint:  fp,
		Outcome:      recordv1.Outcome_OUTCOME_ERROR,
		Status:       &recordv1.Status{Code: 5, Message: []byte("card \xff declined"), Details: []*anypb.Any{detail}},
		Header:       []*recordv1.Metadata{{Key: "x", Values: [][]byte{[]byte("1"), []byte("2")}}, {Key: "x-trace-bin", Values: [][]byte{{0xff, 0x01}}}},
		ResponseType: "",
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	stream := valid()
	stream.Outcome, stream.ResponseType = recordv1.Outcome_OUTCOME_STREAM, "grpc.testing.StreamingOutputCallResponse"
	stream.Messages = [][]byte{{0x0a, 0x01, 0x00}, nil, {0xff}}
	streamOK := proto.Clone(stream).(*recordv1.Record)
	streamOK.Status = nil
	for name, in := range map[string]*recordv1.Record{"error": valid(), "stream": stream, "stream ok": streamOK} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := record.Encode(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := record.Decode(data, fp)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(in, out, protocmp.Transform()); diff != "" {
				t.Fatalf("round trip (-in +out):\n%s", diff)
			}
		})
	}
}

// TestDecodeEarlierRecords reads records written by earlier code, so an
// upgrade replays what is stored: version 1 records (made with the
// generated code of version 1, whose metadata values and status message
// were strings), and version 2 records written while the record proto was the
// public package idempotency.v1 (gen/idempotency/v1), before it moved
// under internal/ with its field numbers unchanged. v2-stream.bin is a
// server stream's record (OUTCOME_STREAM, whose messages are field 12) as
// the code of record version 2 writes it, so a change that would misread a
// stored stream fails here. Each version 2 file is record.Encode of the
// record the test wants of it.
func TestDecodeEarlierRecords(t *testing.T) {
	t.Parallel()
	ts := &timestamppb.Timestamp{Seconds: 1760000000, Nanos: 5}
	ts2 := &timestamppb.Timestamp{Seconds: 1764000000, Nanos: 7}
	detail2, err := anypb.New(durationpb.New(2500000000))
	if err != nil {
		t.Fatal(err)
	}
	detail, err := anypb.New(durationpb.New(1500000000))
	if err != nil {
		t.Fatal(err)
	}
	detail3, err := anypb.New(durationpb.New(3000000000))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*recordv1.Record{
		"v1-error.bin": {Version: 1, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
			Outcome:   recordv1.Outcome_OUTCOME_ERROR,
			Status:    &recordv1.Status{Code: 9, Message: []byte("card declined"), Details: []*anypb.Any{detail}},
			Trailer:   []*recordv1.Metadata{{Key: "x-reason", Values: [][]byte{[]byte("insufficient funds")}}},
			CreatedAt: ts, CompletedAt: ts},
		"v1-response.bin": {Version: 1, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
			Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "google.protobuf.Duration",
			Response: []byte{0x08, 0x2a},
			Header: []*recordv1.Metadata{
				{Key: "x-a", Values: [][]byte{[]byte("1"), []byte("2")}},
				{Key: "x-b", Values: [][]byte{[]byte("three")}},
			},
			CreatedAt: ts, CompletedAt: ts},
		"v2-error.bin": {Version: 2, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
			Outcome:   recordv1.Outcome_OUTCOME_ERROR,
			Status:    &recordv1.Status{Code: 5, Message: []byte("no \xff such"), Details: []*anypb.Any{detail2}},
			Trailer:   []*recordv1.Metadata{{Key: "x-trace-bin", Values: [][]byte{{0, 0xfe, 0xff}}}},
			CreatedAt: ts2, CompletedAt: ts2},
		"v2-response.bin": {Version: 2, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
			Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "google.protobuf.Duration",
			Response:  []byte{0x08, 0x07},
			Header:    []*recordv1.Metadata{{Key: "x-charge-id", Values: [][]byte{[]byte("ch_1")}}},
			CreatedAt: ts2, CompletedAt: ts2},
		"v2-not-retained.bin": {Version: 2, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
			Outcome: recordv1.Outcome_OUTCOME_NOT_RETAINED, CreatedAt: ts2, CompletedAt: ts2},
		"v2-stream.bin": {Version: 2, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
			Outcome: recordv1.Outcome_OUTCOME_STREAM, ResponseType: "google.protobuf.Duration",
			Messages:  [][]byte{{0x08, 0x01}, {}, {0x08, 0x03, 0x10, 0x05}},
			Status:    &recordv1.Status{Code: 14, Message: []byte("feed \xff gone"), Details: []*anypb.Any{detail3}},
			Header:    []*recordv1.Metadata{{Key: "x-feed-id", Values: [][]byte{[]byte("f_1"), []byte("f_2")}}},
			Trailer:   []*recordv1.Metadata{{Key: "x-trace-bin", Values: [][]byte{{0xff, 0x00}}}},
			CreatedAt: ts2, CompletedAt: &timestamppb.Timestamp{Seconds: 1764000002, Nanos: 9}},
	}
	// The stream's messages, in the order the handler sent them: the second
	// is a zero Duration, whose encoding is empty, and must still count.
	streamMessages := []*durationpb.Duration{{Seconds: 1}, {}, {Seconds: 3, Nanos: 5}}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := record.Decode(data, fp)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, got, protocmp.Transform()); diff != "" {
				t.Fatalf("%s (-want +got):\n%s", name, diff)
			}
			if got.GetOutcome() != recordv1.Outcome_OUTCOME_STREAM {
				return
			}
			if len(got.GetMessages()) != len(streamMessages) {
				t.Fatalf("%d stream messages, want %d", len(got.GetMessages()), len(streamMessages))
			}
			for i, m := range got.GetMessages() {
				var d durationpb.Duration
				if err := proto.Unmarshal(m, &d); err != nil {
					t.Fatalf("stream message %d does not decode as %s: %v", i, got.GetResponseType(), err)
				}
				if d.GetSeconds() != streamMessages[i].GetSeconds() || d.GetNanos() != streamMessages[i].GetNanos() {
					t.Errorf("stream message %d = %ds %dns, want %ds %dns", i,
						d.GetSeconds(), d.GetNanos(), streamMessages[i].GetSeconds(), streamMessages[i].GetNanos())
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	mutate := func(f func(r *recordv1.Record)) []byte {
		r := valid()
		f(r)
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := map[string][]byte{
		"garbage":           []byte("\xff\xff\xff not a proto"),
		"empty":             nil,
		"future version":    mutate(func(r *recordv1.Record) { r.Version = record.Version + 1 }),
		"version 0":         mutate(func(r *recordv1.Record) { r.Version = 0 }),
		"in flight":         mutate(func(r *recordv1.Record) { r.State = recordv1.State_STATE_IN_FLIGHT }),
		"other fingerprint": mutate(func(r *recordv1.Record) { r.Fingerprint = []byte{9} }),
		"no outcome":        mutate(func(r *recordv1.Record) { r.Outcome = 0 }),
		"unknown outcome":   mutate(func(r *recordv1.Record) { r.Outcome = 99 }),
		"error without code": mutate(func(r *recordv1.Record) {
			r.Status.Code = 0
		}),
		"error with bad code": mutate(func(r *recordv1.Record) { r.Status.Code = 42 }),
		"response without type": mutate(func(r *recordv1.Record) {
			r.Outcome = recordv1.Outcome_OUTCOME_RESPONSE
		}),
		"stream without type": mutate(func(r *recordv1.Record) {
			r.Outcome = recordv1.Outcome_OUTCOME_STREAM
		}),
		"stream with bad code": mutate(func(r *recordv1.Record) {
			r.Outcome, r.ResponseType, r.Status.Code = recordv1.Outcome_OUTCOME_STREAM, "x.Y", 42
		}),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := record.Decode(data, fp); !errors.Is(err, record.ErrUnreadable) {
				t.Fatalf("Decode = %v, want ErrUnreadable", err)
			}
		})
	}
}

func FuzzRecord(f *testing.F) {
	good, err := record.Encode(valid())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, fp)
	f.Add([]byte{}, []byte{})
	f.Add([]byte("\x08\x01\x10\x02\x1a\x03\x01\x02\x03\x20\x01"), fp)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, fp)
	f.Fuzz(func(t *testing.T, data, fingerprint []byte) {
		r, err := record.Decode(data, fingerprint)
		if err != nil {
			if !errors.Is(err, record.ErrUnreadable) {
				t.Fatalf("error %v does not wrap ErrUnreadable", err)
			}
			return
		}
		// A record that decodes re-encodes and decodes to the same record.
		again, err := record.Encode(r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		r2, err := record.Decode(again, fingerprint)
		if err != nil || !proto.Equal(r, r2) {
			t.Fatalf("decoded record does not round-trip: %v", err)
		}
	})
}

// TestDecodeInto: DecodeInto decodes as Decode does, into the record and
// timestamps it is given, and leaves a timestamp the record does not hold
// nil, even in a record that held one before.
func TestDecodeInto(t *testing.T) {
	t.Parallel()
	with := valid()
	with.CreatedAt = &timestamppb.Timestamp{Seconds: 1760000000, Nanos: 5}
	with.CompletedAt = &timestamppb.Timestamp{Seconds: 1760000001, Nanos: 7}
	var r recordv1.Record
	var created, completed timestamppb.Timestamp
	for _, in := range []*recordv1.Record{with, valid(), with} {
		data, err := record.Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := record.DecodeInto(&r, &created, &completed, data, fp); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(in, &r, protocmp.Transform()); diff != "" {
			t.Fatalf("decoded (-in +out):\n%s", diff)
		}
		if in.CompletedAt != nil && r.CompletedAt != &completed {
			t.Fatal("completed_at not decoded into the timestamp given")
		}
	}
}
