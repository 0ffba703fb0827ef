//go:build ignore

// Command modproxy serves tagged modules of a git repository from a
// directory, the layout the go command reads with GOPROXY=file://DIR:
// DIR/<module>/@v/list, and <version>.info, .mod and .zip beside it. The
// zip is what the go command itself makes from a tag
// (golang.org/x/mod/zip.CreateFromVCS: git archive of the module's
// directory, without nested modules, with the repository's LICENSE when
// the directory has none), so a module's checksum is the one the public
// module proxy will compute from the same tag. scripts/release.sh runs it
// for each step of a release, with one line per module on stdin:
//
//	<module path> <version> <directory, . for the root> <git revision>
//
// It is built from tools.mod, which requires golang.org/x/mod, so that no
// published module requires it; the build tag keeps it out of the root
// module (go mod tidy, go vet ./...):
//
//	GOWORK=off go build -modfile=tools.mod -o modproxy internal/tools/modproxy/main.go
//	modproxy -repo . -proxy /tmp/proxy <modules.txt
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the git repository that holds the tags")
	proxy := flag.String("proxy", "", "the proxy directory to write (GOPROXY=file://DIR)")
	flag.Parse()
	if *proxy == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -repo DIR -proxy DIR <lines of: module version directory revision>")
		os.Exit(2)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			fail("want 4 fields (module version directory revision), got %q", sc.Text())
		}
		if err := publish(*repo, *proxy, module.Version{Path: f[0], Version: f[1]}, f[2], f[3]); err != nil {
			fail("%s@%s: %v", f[0], f[1], err)
		}
	}
	if err := sc.Err(); err != nil {
		fail("reading stdin: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "modproxy: "+format+"\n", args...)
	os.Exit(1)
}

// publish writes m's .info, .mod and .zip, from directory dir of repo at
// revision rev, and adds its version to the module's list.
func publish(repo, proxy string, m module.Version, dir, rev string) error {
	if err := module.Check(m.Path, m.Version); err != nil {
		return err
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	subdir := ""
	if dir != "." {
		subdir = dir
	}
	at := filepath.Join(proxy, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}

	gomod, err := git(repo, "show", rev+":"+path.Join(subdir, "go.mod"))
	if err != nil {
		return err
	}
	commitTime, err := git(repo, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(commitTime)))
	if err != nil {
		return fmt.Errorf("commit time of %s: %v", rev, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, t.UTC()})
	if err != nil {
		return err
	}

	var z bytes.Buffer
	if err := zip.CreateFromVCS(&z, m, repo, rev, subdir); err != nil {
		return err
	}

	for ext, data := range map[string][]byte{".info": info, ".mod": gomod, ".zip": z.Bytes()} {
		if err := os.WriteFile(filepath.Join(at, escVersion+ext), data, 0o644); err != nil {
			return err
		}
	}
	return addToList(filepath.Join(at, "list"), m.Version)
}

// addToList adds version to the list file, one version a line.
func addToList(file, version string) error {
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	versions := strings.Fields(string(old))
	if slices.Contains(versions, version) {
		return nil
	}
	versions = append(versions, version)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// git runs git in repo and returns its standard output.
func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
