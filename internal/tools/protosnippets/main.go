// Command protosnippets builds every proto snippet of the documentation
// with buf, so that no snippet a reader copies can be wrong.
//
// It reads the Markdown files given as arguments, takes each fenced code
// block whose info string is "proto", and builds it with `buf build` in a
// temporary workspace of two modules: the snippet, and this repository's
// proto/ directory (so that "idempotency/v1/options.proto" imports as it
// does in a reader's tree, with the well-known types that buf provides).
// Each snippet is built alone, so two snippets may declare the same names.
//
// The convention for snippets (documented in CONTRIBUTING.md, "Proto
// snippets in the docs"):
//
//   - A block with a `syntax = ...` line is a whole file and is built as it
//     is: declare every message it uses.
//   - A block without one is a fragment of rpc declarations. It is wrapped
//     in a file with package snippet.v1, an import of
//     idempotency/v1/options.proto and a service around the fragment, and
//     each unqualified message name of its rpc signatures is declared as an
//     empty message. A fragment that declares no rpc is an error: write a
//     whole file instead.
//   - Text that must not be built (a counter-example) goes in a block of
//     another language, such as "text".
//
// Usage, from the repository root (make check-docs):
//
//	go run ./internal/tools/protosnippets README.md docs/*.md examples/*/README.md
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	bufCmd := flag.String("buf", "go tool -modfile=tools.mod buf", "the command that runs buf")
	protoDir := flag.String("proto", "proto", "the directory holding idempotency/v1/options.proto")
	flag.Parse()
	if err := run(os.Stdout, strings.Fields(*bufCmd), *protoDir, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "protosnippets:", err)
		os.Exit(1)
	}
}

// run builds the proto snippets of files and reports each on out.
func run(out io.Writer, bufCmd []string, protoDir string, files []string) error {
	optionsDir, err := filepath.Abs(protoDir)
	if err != nil {
		return err
	}
	var failed int
	var count int
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		snippets, err := extract(name, string(text))
		if err != nil {
			return err
		}
		for _, s := range snippets {
			count++
			if err := build(bufCmd, optionsDir, s); err != nil {
				failed++
				fmt.Fprintf(out, "FAIL %s:%d: %v\n", s.file, s.line, err)
				continue
			}
			fmt.Fprintf(out, "ok   %s:%d\n", s.file, s.line)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d proto snippets do not build", failed, count)
	}
	fmt.Fprintf(out, "%d proto snippets build\n", count)
	return nil
}

// snippet is one proto block of a Markdown file.
type snippet struct {
	file string
	line int // of the opening fence
	text string
}

// extract returns the proto blocks of a Markdown text.
func extract(file, text string) ([]snippet, error) {
	var out []snippet
	var cur *snippet
	var body strings.Builder
	var fence string
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = "```"
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "proto" {
				cur = &snippet{file: file, line: n}
				body.Reset()
			}
		case fence != "" && trimmed == fence:
			fence = ""
			if cur != nil {
				cur.text = body.String()
				out = append(out, *cur)
				cur = nil
			}
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if fence != "" {
		return nil, fmt.Errorf("%s: a code block is not closed", file)
	}
	return out, nil
}

var (
	syntaxLine = regexp.MustCompile(`(?m)^\s*(syntax|edition)\s*=`)
	rpcTypes   = regexp.MustCompile(`\brpc\s+\w+\s*\(\s*(?:stream\s+)?([\w.]+)\s*\)\s*returns\s*\(\s*(?:stream\s+)?([\w.]+)\s*\)`)
)

// source returns the file to build for a snippet: the snippet itself when
// it is a whole file, else the fragment wrapped in a service.
func source(s snippet) (string, error) {
	if syntaxLine.MatchString(s.text) {
		return s.text, nil
	}
	rpcs := rpcTypes.FindAllStringSubmatch(s.text, -1)
	if len(rpcs) == 0 {
		return "", fmt.Errorf("a proto block without a syntax line must be rpc declarations; write a whole file")
	}
	var messages []string
	for _, m := range rpcs {
		for _, name := range m[1:] {
			if !strings.Contains(name, ".") && !slices.Contains(messages, name) {
				messages = append(messages, name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\n\npackage snippet.v1;\n\nimport \"idempotency/v1/options.proto\";\n\nservice SnippetService {\n")
	b.WriteString(s.text)
	b.WriteString("}\n")
	for _, m := range messages {
		fmt.Fprintf(&b, "\nmessage %s {}\n", m)
	}
	return b.String(), nil
}

// build runs buf build on the snippet in a temporary workspace whose
// second module is optionsDir.
func build(bufCmd []string, optionsDir string, s snippet) error {
	src, err := source(s)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "protosnippet")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "snippet"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(optionsDir, filepath.Join(dir, "deps")); err != nil {
		return err
	}
	workspace := "version: v2\nmodules:\n  - path: snippet\n  - path: deps\n"
	if err := os.WriteFile(filepath.Join(dir, "buf.yaml"), []byte(workspace), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "snippet", "snippet.proto"), []byte(src), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bufCmd[0], append(bufCmd[1:], "build", dir)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s--- built as:\n%s", err, msg, src)
	}
	return nil
}
