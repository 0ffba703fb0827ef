package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// printJSON writes m as one line of protojson, the gRPC JSON mapping that
// grpcurl and grpc-gateway write.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return failure("encoding %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	// protojson varies its spaces from build to build, on purpose: one
	// line without them reads the same in every release.
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return failure("encoding %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(w)
	return err
}

// stateName is a state as --state takes it and the log lines write it.
func stateName(s adminv1.State) string {
	switch s {
	case adminv1.State_STATE_IN_FLIGHT:
		return "in_flight"
	case adminv1.State_STATE_COMPLETED:
		return "completed"
	case adminv1.State_STATE_ABANDONED:
		return "abandoned"
	}
	return "unknown"
}

// span is a duration as a person reads it: to the second above a minute,
// to the millisecond below.
func span(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// when is ts and how far it is from now: "2026-01-02T15:04:05.123Z (3m2s
// ago)"; "unknown" when ts is unset.
func when(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "unknown"
	}
	t := ts.AsTime()
	rel := span(now.Sub(t)) + " ago"
	if t.After(now) {
		rel = "in " + span(t.Sub(now))
	}
	return t.Format("2006-01-02T15:04:05.000Z07:00") + " (" + rel + ")"
}

// age is how long ago ts was, "-" when unset.
func age(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "-"
	}
	return span(max(now.Sub(ts.AsTime()), 0))
}

// left is how long until ts, "-" when unset.
func left(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "-"
	}
	return span(max(ts.AsTime().Sub(now), 0))
}

// size is a number of bytes as a person reads it.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/unit, 0
	for ; f >= unit && i < 3; i++ {
		f /= unit
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGT"[i])
}

// fields writes "label  value" lines, and blocks of text indented under
// them, every value and line of text through escape: whatever a value
// holds, it stays on its line, and a block's lines under their label.
type fields struct{ w io.Writer }

func (f fields) line(label, value string) { fmt.Fprintf(f.w, "%-12s %s\n", label, escape(value)) }

func (f fields) block(text string) {
	for l := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(f.w, "  %s\n", escape(l))
	}
}

// printEntry writes e as a person reads it, its outcome included.
func printEntry(w io.Writer, e *adminv1.Entry, now time.Time) {
	f := fields{w}
	o := e.GetOutcome()
	f.line("store key", e.GetStoreKey())
	if e.GetKeyError() != "" {
		f.line("key error", e.GetKeyError())
	}
	f.line("state", stateName(e.GetState()))
	f.line("etag", e.GetEtag())
	f.line("fingerprint", base64.StdEncoding.EncodeToString(e.GetFingerprint()))
	f.line("size", size(e.GetSizeBytes()))
	f.line("claimed", when(firstSet(e.GetClaimTime(), o.GetCreateTime()), now))
	if e.GetAttempt() > 0 {
		f.line("attempt", fmt.Sprint(e.GetAttempt()))
	}
	switch e.GetState() {
	case adminv1.State_STATE_IN_FLIGHT:
		f.line("lease ends", when(e.GetExpireTime(), now))
		return
	case adminv1.State_STATE_ABANDONED:
		f.line("kept until", when(e.GetExpireTime(), now))
		return
	}
	f.line("completed", when(firstSet(e.GetCompleteTime(), o.GetCompleteTime()), now))
	f.line("expires", when(e.GetExpireTime(), now))
	if e.GetSealedBy() != "" {
		f.line("sealed by", e.GetSealedBy())
	}
	if e.GetOutcomeError() != "" {
		f.line("outcome", "unreadable: "+e.GetOutcomeError())
		if e.GetSealedUnopened() {
			return // get's error says where it opens (exit 6)
		}
		if e.GetSealedBy() != "" {
			f.block("A sealed record opens only with its key, for the scope of its calls: name it with --scope and --key.")
			f.block("If the server cannot open it for its own scope, it answers this key INTERNAL / IDEMPOTENCY_RECORD_CORRUPT; purging it lets the next call run again.")
			return
		}
		f.block("The server answers this key INTERNAL / IDEMPOTENCY_RECORD_CORRUPT; purging it lets the next call run again.")
		return
	}
	if o != nil {
		printOutcome(f, o)
	}
}

func firstSet(a, b *timestamppb.Timestamp) *timestamppb.Timestamp {
	if a != nil {
		return a
	}
	return b
}

// printOutcome writes what every retry of the key is answered.
func printOutcome(f fields, o *adminv1.Outcome) {
	switch o.GetKind() {
	case adminv1.Kind_KIND_RESPONSE:
		f.line("outcome", "response")
	case adminv1.Kind_KIND_ERROR:
		f.line("outcome", "error")
	case adminv1.Kind_KIND_STREAM:
		f.line("outcome", fmt.Sprintf("stream of %d messages", len(o.GetMessages())))
	case adminv1.Kind_KIND_NOT_RETAINED:
		f.line("outcome", "not retained: the handler ran; its outcome was too large to keep or could not be encoded, and retries get FAILED_PRECONDITION")
	case adminv1.Kind_KIND_HTTP:
		f.line("outcome", "HTTP answer")
	default:
		f.line("outcome", o.GetKind().String())
	}
	f.line("record", fmt.Sprintf("version %d", o.GetRecordVersion()))
	printMetadata(f, "header", o.GetHeader())
	if o.GetKind() == adminv1.Kind_KIND_RESPONSE {
		printMessage(f, "response", o.GetResponse())
	}
	for i, m := range o.GetMessages() {
		printMessage(f, fmt.Sprintf("message %d", i+1), m)
	}
	if s := o.GetStatus(); s != nil {
		f.line("status", fmt.Sprintf("%s (%d): %s", s.GetCodeName(), s.GetCode(), s.GetMessage()))
		for _, d := range s.GetDetails() {
			printMessage(f, "detail", d)
		}
	}
	printMetadata(f, "trailer", o.GetTrailer())
	if h := o.GetHttp(); h != nil {
		printHTTP(f, h)
	}
}

// printMetadata writes one line per key, its values joined.
func printMetadata(f fields, label string, md []*adminv1.Metadata) {
	for _, m := range md {
		f.line(label, m.GetKey()+": "+strings.Join(m.GetValues(), ", "))
	}
}

// printMessage writes a message's type, then its JSON, or its bytes and
// why they are not JSON.
func printMessage(f fields, label string, m *adminv1.Message) {
	f.line(label, m.GetType())
	if v := m.GetJson(); v != nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v.AsInterface()); err == nil {
			f.block(b.String())
			return
		}
	}
	f.block("bytes (base64): " + base64.StdEncoding.EncodeToString(m.GetRaw()))
	if m.GetRawReason() != "" {
		f.block("not decoded: " + m.GetRawReason())
	}
}

// printHTTP writes an HTTP answer stored by httpidempotency.
func printHTTP(f fields, h *adminv1.HttpResponse) {
	if h.GetNotRetained() {
		f.line("http", "not retained: the handler ran; retries are answered that its response was not retained")
		return
	}
	f.line("http status", fmt.Sprint(h.GetStatus()))
	printMetadata(f, "http header", h.GetHeaders())
	switch b := h.GetBody().(type) {
	case *adminv1.HttpResponse_Text:
		f.line("body", "")
		f.block(b.Text)
	case *adminv1.HttpResponse_Raw:
		f.line("body", "bytes (base64): "+base64.StdEncoding.EncodeToString(b.Raw))
	}
}
