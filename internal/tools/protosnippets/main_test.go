package main

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	md := strings.Join([]string{
		"# Title",
		"```proto",
		"syntax = \"proto3\";",
		"```",
		"```go",
		"x := 1 // ```proto inside another block is not a block",
		"```",
		"  ```proto",
		"  rpc A(B) returns (C);",
		"  ```",
		"```text",
		"mode: REQUIRED",
		"```",
	}, "\n")
	got, err := extract("doc.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []snippet{
		{file: "doc.md", line: 2, text: "syntax = \"proto3\";\n"},
		{file: "doc.md", line: 8, text: "  rpc A(B) returns (C);\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d snippets, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("snippet %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := extract("doc.md", "```proto\nsyntax = \"proto3\";\n"); err == nil {
		t.Error("an unclosed block was accepted")
	}
}

func TestSource(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		text     string
		contains []string
		absent   []string
		wantErr  bool
	}{
		"whole file as it is": {
			text:     "syntax = \"proto3\";\npackage a.v1;\n",
			contains: []string{"package a.v1;"},
			absent:   []string{"snippet.v1"},
		},
		"edition file as it is": {
			text:     "edition = \"2023\";\n",
			contains: []string{"edition"},
			absent:   []string{"snippet.v1"},
		},
		"rpc fragment wrapped, its messages declared once": {
			text: "rpc Charge(ChargeRequest) returns (ChargeResponse) {\n  option (idempotency.v1.method) = { mode: MODE_REQUIRED };\n}\n" +
				"rpc Refund(ChargeRequest) returns (stream google.protobuf.Empty);\n",
			contains: []string{
				"package snippet.v1;", `import "idempotency/v1/options.proto";`, "service SnippetService {",
				"message ChargeRequest {}", "message ChargeResponse {}",
			},
			absent: []string{"message google.protobuf.Empty", "message Empty"},
		},
		"fragment without rpc": {text: "message A {}\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := source(snippet{file: "doc.md", line: 1, text: tc.text})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error; built as:\n%s", src)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(src, s) {
					t.Errorf("source lacks %q:\n%s", s, src)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(src, s) {
					t.Errorf("source has %q:\n%s", s, src)
				}
			}
			if n := strings.Count(src, "message ChargeRequest {}"); n > 1 {
				t.Errorf("ChargeRequest declared %d times", n)
			}
		})
	}
}
