package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// hostile is text a client or a handler may have had stored: terminal
// escapes (clear the screen, set the title, a CSI as a C1 control), a
// carriage return, a bidi override, and a forged line of get's output.
const hostile = "declined\x1b[2J\x1b]0;pwned\x07\r\u009b31m\u202etxt.exe\nstate        completed-FAKE\tx\x00\x7f"

// TestPrintHostile: get, list and purge print stored text through escape:
// no control character, C1 control or bidi override reaches the terminal,
// no stored text starts a line of its own, and --json keeps the exact
// bytes.
func TestPrintHostile(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	md := []*adminv1.Metadata{{Key: "x-echo" + hostile, Values: []string{hostile, "ok"}}}
	msg := &adminv1.Message{Type: "shop.v1.Charge" + hostile, Content: &adminv1.Message_Raw{Raw: []byte{1}}, RawReason: hostile}
	entry := &adminv1.Entry{
		StoreKey: "key" + hostile, State: adminv1.State_STATE_COMPLETED, Etag: "etag" + hostile,
		ClaimTime: timestamppb.New(now.Add(-time.Minute)), ExpireTime: timestamppb.New(now.Add(time.Hour)),
		SealedBy: "k" + hostile,
		Outcome: &adminv1.Outcome{
			Kind: adminv1.Kind_KIND_STREAM, ResponseType: "t" + hostile, Header: md, Trailer: md,
			Messages: []*adminv1.Message{msg, {Type: "google.protobuf.StringValue", Content: &adminv1.Message_Json{Json: structpb.NewStringValue(hostile)}}},
			Status:   &adminv1.Status{Code: 3, CodeName: "INVALID_ARGUMENT" + hostile, Message: hostile, Details: []*adminv1.Message{msg}},
			Http:     &adminv1.HttpResponse{Status: 200, Headers: md, Body: &adminv1.HttpResponse_Text{Text: hostile + "\n" + hostile}},
		},
	}
	var out bytes.Buffer
	printEntry(&out, entry, now)
	c := &cli{stdout: &out}
	if err := c.printEntries(tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0), []*adminv1.Entry{entry}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if r, ok := unsafeIn(text); ok {
		t.Fatalf("the text output holds %U:\n%s", r, text)
	}
	if n := len(regexp.MustCompile(`(?m)^state `).FindAllString(text, -1)); n != 1 {
		t.Fatalf("%d lines start with \"state \", want get's own only:\n%s", n, text)
	}
	if strings.Contains(text, "\nstate        completed-FAKE") {
		t.Fatalf("a forged line:\n%s", text)
	}

	var js bytes.Buffer
	if err := printJSON(&js, &adminv1.GetKeyResponse{Entry: entry}); err != nil {
		t.Fatal(err)
	}
	var back adminv1.GetKeyResponse
	if err := protojson.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(entry, back.GetEntry()) {
		t.Fatalf("--json does not keep the exact text: read back\n%v\nwant\n%v", back.GetEntry(), entry)
	}
}

// unsafeIn returns the first character of s that escape escapes, other
// than the newlines that end lines.
func unsafeIn(s string) (rune, bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != '\n' && unsafeRune(r, n) {
			return r, true
		}
		i += n
	}
	return 0, false
}

func TestEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain 8yqvEk4b-_ é 漢字 \\n": "plain 8yqvEk4b-_ é 漢字 \\n",
		"a\nb\r\tc":                 `a\nb\r\tc`,
		"\x1b[2J\x00\x7f":           `\x1b[2J\x00\x7f`,
		"\u009b\u0085":              `\u009b\u0085`,
		"\u202eabc\u2066\u200f":     `\u202eabc\u2066\u200f`,
		"\xff\xc3(":                 `\xff\xc3(`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzEscape: escape never panics, and what it returns is valid UTF-8
// with nothing it escapes left in it, and s itself when s needs nothing
// escaped.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "ok", hostile, "\u202e", "\xe2\x80", "\xc2\x9b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("escape(%q) = %q: not UTF-8", s, got)
		}
		if r, ok := unsafeIn(got); ok || strings.ContainsRune(got, '\n') {
			t.Fatalf("escape(%q) = %q holds %U", s, got, r)
		}
		if _, ok := unsafeIn(s); !ok && !strings.ContainsRune(s, '\n') && got != s {
			t.Fatalf("escape(%q) = %q, want it unchanged", s, got)
		}
	})
}

// TestSealedErrorHostile: the error get prints for a sealed record that
// did not open escapes what the record and the service gave, its key ID
// (any bytes a stored record holds) and the reason it did not open, on a
// store reached directly and through an admin service.
func TestSealedErrorHostile(t *testing.T) {
	t.Parallel()
	entry := &adminv1.Entry{
		StoreKey: "key" + hostile, State: adminv1.State_STATE_COMPLETED,
		SealedBy: "k" + hostile, OutcomeError: "why" + hostile, SealedUnopened: true,
	}
	for _, direct := range []bool{true, false} {
		err := sealedError(&conn{where: "the admin service at localhost:1", direct: direct}, keyRef{scope: "acme"}, entry)
		if err == nil {
			t.Fatal("no error for a sealed record that did not open")
		}
		msg := strings.ReplaceAll(err.Error(), "\n  idempotencyctl --addr", " idempotencyctl --addr") // the hint's own line
		if r, ok := unsafeIn(msg); ok || strings.ContainsRune(msg, '\n') {
			t.Errorf("direct %v: the error holds %U or a line of its own:\n%s", direct, r, err)
		}
	}
}
