// Command gosnippets checks every Go snippet of the documentation, so that
// no snippet a reader copies stops mid-call or fails to build.
//
// It reads the Markdown files given as arguments and takes each fenced
// code block whose info string is "go". The convention (documented in
// CONTRIBUTING.md, "Go snippets in the docs"):
//
//   - A block whose first line is a package clause, or that the line
//     `<!-- compile -->` comes just before, is a whole file. It is copied
//     alone into a temporary module inside this repository's workspace
//     (a go.work that uses every module of go.work and the snippet's), so
//     that it imports this repository's modules as they are and any module
//     they require, and it must pass `go build` and `go vet`.
//   - A whole file built by another check says so with the line
//     `<!-- compiled by scripts/NAME -->` before it (the README's
//     quickstart, which needs its generated code): it is left to NAME,
//     which must exist.
//   - Any other block is a fragment: it must parse as Go declarations or
//     as a list of whole statements (a quote that stops mid-call does not).
//     Write "// ..." for what it leaves out.
//   - Text that must not be checked (a counter-example, a signature) goes
//     in a block of another language, such as "text".
//
// Usage, from the repository root (make check-docs):
//
//	go run ./internal/tools/gosnippets README.md docs/*.md */README.md
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	work := flag.String("work", "go.work", "the workspace whose modules a whole snippet may import")
	flag.Parse()
	if err := run(os.Stdout, *work, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "gosnippets:", err)
		os.Exit(1)
	}
}

// snippet is one go block of a Markdown file.
type snippet struct {
	file string
	line int // the line of its opening fence
	code string
	// whole: a whole file, to build; elsewhere: the script that builds it.
	whole     bool
	elsewhere string
}

func (s snippet) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// run checks the go snippets of files and reports each on out.
func run(out io.Writer, work string, files []string) error {
	var all []snippet
	for _, f := range files {
		ss, err := snippets(f)
		if err != nil {
			return err
		}
		all = append(all, ss...)
	}
	var failed, built, fragments int
	for _, s := range all {
		var err error
		switch {
		case s.elsewhere != "":
			if _, serr := os.Stat(s.elsewhere); serr != nil {
				err = fmt.Errorf("it says it is compiled by %s: %w", s.elsewhere, serr)
			}
		case s.whole:
			built++
			err = build(work, s)
		default:
			fragments++
			err = parseFragment(s.code)
		}
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL %s: %v\n", s, err)
		}
	}
	fmt.Fprintf(out, "gosnippets: %d whole snippets built and vetted, %d fragments parsed\n", built, fragments)
	if failed > 0 {
		return fmt.Errorf("%d of %d go snippets fail", failed, len(all))
	}
	return nil
}

var (
	fenceRE     = regexp.MustCompile("^([ \t]*)(```+|~~~+)[ \t]*([^ \t]*)")
	compileRE   = regexp.MustCompile(`^\s*<!--\s*compile\s*-->\s*$`)
	elsewhereRE = regexp.MustCompile(`^\s*<!--\s*compiled by (\S+)\s*-->\s*$`)
	packageRE   = regexp.MustCompile(`^package [A-Za-z_]\w*\s*$`)
)

// snippets returns the go blocks of the Markdown file f, with the
// indentation of their fence removed.
func snippets(f string) ([]snippet, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	var out []snippet
	var cur *snippet
	var fence, indent, prev string // prev: the last non-blank line since the last fence
	var body []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case fence == "" && m != nil:
			fence, indent = m[2], m[1]
			if m[3] == "go" {
				cur = &snippet{file: f, line: n}
				if compileRE.MatchString(prev) {
					cur.whole = true
				}
				if e := elsewhereRE.FindStringSubmatch(prev); e != nil {
					cur.elsewhere = e[1]
				}
				body = body[:0]
			}
			// A marker covers the block right after it, and no other.
			prev = ""
		case fence != "" && m != nil && strings.HasPrefix(m[2], fence) && m[3] == "":
			if cur != nil {
				cur.code = strings.Join(body, "\n") + "\n"
				if first := firstLine(cur.code); packageRE.MatchString(first) {
					cur.whole = true
				} else if cur.whole {
					return nil, fmt.Errorf("%s: <!-- compile --> before a block with no package clause on its first line", cur)
				}
				if cur.elsewhere != "" {
					cur.whole = false
				}
				out = append(out, *cur)
			}
			fence, cur = "", nil
		case cur != nil:
			body = append(body, strings.TrimPrefix(line, indent))
		case fence == "" && strings.TrimSpace(line) != "":
			prev = line
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: the go block is never closed", cur)
	}
	return out, nil
}

// firstLine returns the first line of code that is not blank.
func firstLine(code string) string {
	for l := range strings.SplitSeq(code, "\n") {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// parseFragment reports whether code parses as Go declarations or as a
// list of statements.
func parseFragment(code string) error {
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "", "package snippet\n"+code, parser.SkipObjectResolution); err == nil {
		return nil
	}
	_, err := parser.ParseFile(fset, "", "package snippet\nfunc _() {\n"+code+"\n}\n", parser.SkipObjectResolution)
	if err == nil {
		return nil
	}
	return fmt.Errorf("not whole Go declarations or statements (quote whole statements; write // ... for what is left out): %w", err)
}

// build copies a whole snippet into a module of its own inside the
// repository, and builds and vets it in a workspace of every module of
// work and its own.
func build(work string, s snippet) (err error) {
	root, err := filepath.Abs(filepath.Dir(work))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(root, ".gosnippet-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	uses, goVersion, err := workUses(work)
	if err != nil {
		return err
	}
	var w strings.Builder
	fmt.Fprintf(&w, "go %s\n\nuse (\n", goVersion)
	for _, u := range uses {
		fmt.Fprintf(&w, "\t%s\n", filepath.Join(root, u))
	}
	fmt.Fprintf(&w, "\t%s\n)\n", dir)
	sum, err := os.ReadFile(filepath.Join(root, "go.work.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	files := map[string]string{
		"go.mod":      fmt.Sprintf("module example.com/snippet\n\ngo %s\n", goVersion),
		"go.work":     w.String(),
		"go.work.sum": string(sum),
		"snippet.go":  s.code,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull, "."}, {"vet", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %w\n%s", args[0], err, strings.ReplaceAll(string(out), dir+"/", ""))
		}
	}
	return nil
}

// workUses returns the directories the go.work file work uses, relative
// to its own, and its go version.
func workUses(work string) (uses []string, goVersion string, err error) {
	b, err := os.ReadFile(work)
	if err != nil {
		return nil, "", err
	}
	inUse := false
	for l := range strings.SplitSeq(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "go "):
			goVersion = strings.TrimSpace(strings.TrimPrefix(l, "go "))
		case l == "use (":
			inUse = true
		case inUse && l == ")":
			inUse = false
		case inUse && l != "" && !strings.HasPrefix(l, "//"):
			uses = append(uses, l)
		case strings.HasPrefix(l, "use "):
			uses = append(uses, strings.TrimSpace(strings.TrimPrefix(l, "use ")))
		}
	}
	if goVersion == "" || len(uses) == 0 {
		return nil, "", fmt.Errorf("%s: no go version or no use directive", work)
	}
	return uses, goVersion, nil
}
