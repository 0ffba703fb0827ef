package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSnippets: which blocks are whole, which are left to another check,
// and which fragments parse. A quote that stops mid-call (the defect that
// made this checker) is refused.
func TestSnippets(t *testing.T) {
	t.Parallel()
	md := strings.Join([]string{
		"A fragment:",
		"```go",
		"p := pkg.New(a,",
		"\tpkg.WithX(b))",
		"```",
		"Stopped mid-call:",
		"```go",
		"router.AddMiddleware(pkg.Middleware(idem,",
		"```",
		"<!-- compile -->",
		"```go",
		"package main",
		"",
		"func main() {}",
		"```",
		"<!-- compiled by scripts/check-quickstart.sh -->",
		"```go",
		"package main",
		"```",
		"- in a list:",
		"  ```go",
		"  type T struct{}",
		"  ```",
		"```text",
		"not go (",
		"```",
	}, "\n")
	f := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(f, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := snippets(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line      int
		whole     bool
		elsewhere string
		parses    bool
	}{
		{2, false, "", true},
		{7, false, "", false},
		{11, true, "", true},
		{17, false, "scripts/check-quickstart.sh", true},
		{21, false, "", true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d snippets %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.line != w.line || g.whole != w.whole || g.elsewhere != w.elsewhere {
			t.Errorf("snippet %d: %+v; want line %d, whole %v, elsewhere %q", i, g, w.line, w.whole, w.elsewhere)
		}
		if g.whole || g.elsewhere != "" {
			continue
		}
		if err := parseFragment(g.code); (err == nil) != w.parses {
			t.Errorf("snippet %d (%s): parse error %v, want parses %v", i, g, err, w.parses)
		}
	}
}

// TestCompileMarkerNeedsPackage: <!-- compile --> before a block without
// a package clause is an error, not a silently skipped build.
func TestCompileMarkerNeedsPackage(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(f, []byte("<!-- compile -->\n```go\nx := 1\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := snippets(f); err == nil {
		t.Fatal("no error for a compile marker before a fragment")
	}
}

// TestMarkerCoversOneBlock: a marker covers the block right after it and
// no other. A second go block after a block marked as compiled elsewhere
// (with only blank lines, or a block of another language, between) is a
// fragment of its own and is checked; it used to inherit the marker, so
// that a broken snippet there was never looked at.
func TestMarkerCoversOneBlock(t *testing.T) {
	t.Parallel()
	for name, between := range map[string]string{
		"blank lines":     "\n\n",
		"a block of text": "\n```text\nnot go\n```\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			md := "<!-- compiled by scripts/check-quickstart.sh -->\n```go\npackage main\n```\n" + between +
				"```go\nrouter.AddMiddleware(pkg.Middleware(idem,\n```\n"
			f := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(f, []byte(md), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := snippets(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("got %d snippets %+v, want 2", len(got), got)
			}
			if s := got[1]; s.whole || s.elsewhere != "" {
				t.Fatalf("the second block %+v inherits the first one's marker; want a fragment, checked", s)
			}
			if err := parseFragment(got[1].code); err == nil {
				t.Fatal("the broken fragment parses")
			}
		})
	}
}

// TestCompileMarkerCoversOneBlock: <!-- compile --> marks the block right
// after it only; the next block, a fragment, is parsed, not refused as a
// marked block without a package clause.
func TestCompileMarkerCoversOneBlock(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "doc.md")
	md := "<!-- compile -->\n```go\npackage main\n\nfunc main() {}\n```\n\n```go\nx := 1\n```\n"
	if err := os.WriteFile(f, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := snippets(f)
	if err != nil {
		t.Fatalf("snippets: %v; want the second block taken as a fragment", err)
	}
	if len(got) != 2 || !got[0].whole || got[1].whole {
		t.Fatalf("snippets %+v; want a whole file, then a fragment", got)
	}
}
