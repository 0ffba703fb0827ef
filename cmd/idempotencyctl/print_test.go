package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// TestPrintEntry checks how get shows each kind of outcome, for those the
// scripts do not store: a stream, an outcome not retained, an HTTP answer,
// a record that cannot be read, a message that is not decoded, and the key
// that sealed a record, whether it opened or not.
func TestPrintEntry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	completed := func(o *adminv1.Outcome, outcomeErr string) *adminv1.Entry {
		return &adminv1.Entry{
			StoreKey: "8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0", State: adminv1.State_STATE_COMPLETED,
			Etag: "3q2-7w", Fingerprint: []byte{1, 2, 3}, SizeBytes: 2048,
			ClaimTime:  timestamppb.New(now.Add(-90 * time.Second)),
			ExpireTime: timestamppb.New(now.Add(24 * time.Hour)),
			Outcome:    o, OutcomeError: outcomeErr,
		}
	}
	str := func(s string) *adminv1.Message {
		return &adminv1.Message{Type: "google.protobuf.StringValue", Content: &adminv1.Message_Json{Json: structpb.NewStringValue(s)}}
	}
	for _, tc := range []struct {
		name  string
		entry *adminv1.Entry
		want  []string // regular expressions, each matching a line
	}{{
		name: "stream",
		entry: completed(&adminv1.Outcome{
			Kind: adminv1.Kind_KIND_STREAM, Messages: []*adminv1.Message{str("a"), str("b")},
			Status:       &adminv1.Status{Code: 0, CodeName: "OK"},
			Trailer:      []*adminv1.Metadata{{Key: "x-trace-bin", Values: []string{"/wAB"}}},
			CompleteTime: timestamppb.New(now.Add(-time.Minute)), RecordVersion: 2,
		}, ""),
		want: []string{
			`^claimed +2026-01-02T15:02:35\.000Z \(1m30s ago\)$`,
			`^completed +2026-01-02T15:03:05\.000Z \(1m0s ago\)$`,
			`^expires +2026-01-03T15:04:05\.000Z \(in 24h0m0s\)$`,
			`^size +2\.0 KiB$`, `^fingerprint +AQID$`,
			`^outcome +stream of 2 messages$`, `^message 1 +google.protobuf.StringValue$`, `^  "a"$`,
			`^message 2 +google.protobuf.StringValue$`, `^  "b"$`, `^status +OK \(0\): $`,
			`^trailer +x-trace-bin: /wAB$`,
		},
	}, {
		name:  "not retained",
		entry: completed(&adminv1.Outcome{Kind: adminv1.Kind_KIND_NOT_RETAINED, RecordVersion: 2}, ""),
		want:  []string{`^outcome +not retained: the handler ran;`},
	}, {
		name: "http text",
		entry: completed(&adminv1.Outcome{Kind: adminv1.Kind_KIND_HTTP, Http: &adminv1.HttpResponse{
			Status: 201, Headers: []*adminv1.Metadata{{Key: "Content-Type", Values: []string{"application/json"}}},
			Body: &adminv1.HttpResponse_Text{Text: `{"id": 12345678901234567890}`},
		}}, ""),
		want: []string{`^outcome +HTTP answer$`, `^http status +201$`, `^http header +Content-Type: application/json$`, `^body +$`, `^  \{"id": 12345678901234567890\}$`},
	}, {
		name: "http raw",
		entry: completed(&adminv1.Outcome{Kind: adminv1.Kind_KIND_HTTP, Http: &adminv1.HttpResponse{
			Status: 200, Body: &adminv1.HttpResponse_Raw{Raw: []byte{0xff, 0}},
		}}, ""),
		want: []string{`^body +bytes \(base64\): /wA=$`},
	}, {
		name:  "http not retained",
		entry: completed(&adminv1.Outcome{Kind: adminv1.Kind_KIND_HTTP, Http: &adminv1.HttpResponse{NotRetained: true}}, ""),
		want:  []string{`^http +not retained:`},
	}, {
		name: "message not decoded",
		entry: completed(&adminv1.Outcome{Kind: adminv1.Kind_KIND_RESPONSE, ResponseType: "shop.v1.ChargeResponse", Response: &adminv1.Message{
			Type: "shop.v1.ChargeResponse", Content: &adminv1.Message_Raw{Raw: []byte{0x0a, 0x01, 0x78}}, RawReason: "unknown type",
		}}, ""),
		want: []string{`^response +shop.v1.ChargeResponse$`, `^  bytes \(base64\): CgF4$`, `^  not decoded: unknown type$`},
	}, {
		name:  "unreadable",
		entry: completed(nil, "record: version 9 is not known"),
		want:  []string{`^outcome +unreadable: record: version 9 is not known$`, `IDEMPOTENCY_RECORD_CORRUPT`},
	}, {
		name: "sealed",
		entry: func() *adminv1.Entry {
			e := completed(&adminv1.Outcome{Kind: adminv1.Kind_KIND_RESPONSE, ResponseType: "google.protobuf.StringValue", Response: str("ok"), RecordVersion: 2}, "")
			e.SealedBy = "k-2025"
			return e
		}(),
		want: []string{`^expires +.*\n^sealed by +k-2025\n^outcome +response$`, `^response +google.protobuf.StringValue$`, `^  "ok"$`},
	}, {
		name: "sealed by a key no longer held",
		entry: func() *adminv1.Entry {
			e := completed(nil, `stored idempotency record is unreadable: the record is sealed by key "k-2024", which the keyring does not hold`)
			e.SealedBy = "k-2024"
			return e
		}(),
		want: []string{`^sealed by +k-2024$`, `^outcome +unreadable: .*sealed by key "k-2024", which the keyring does not hold$`, `^  A sealed record opens only with its key, for the scope of its calls: name it with --scope and --key\.$`, `IDEMPOTENCY_RECORD_CORRUPT`},
	}, {
		name: "claim time unknown",
		entry: &adminv1.Entry{StoreKey: "k", State: adminv1.State_STATE_IN_FLIGHT,
			ExpireTime: timestamppb.New(now.Add(30 * time.Second))},
		want: []string{`^state +in_flight$`, `^claimed +unknown$`, `^lease ends +2026-01-02T15:04:35\.000Z \(in 30s\)$`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			printEntry(&out, tc.entry, now)
			for _, w := range tc.want {
				if !regexp.MustCompile(`(?m)` + w).Match(out.Bytes()) {
					t.Errorf("no line matches %s in:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestSize checks the sizes list and stats print.
func TestSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 2 << 40: "2.0 TiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
