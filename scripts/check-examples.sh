#!/usr/bin/env bash
# The README quotes the root package's examples and says they can be copied
# into an empty module. This copies them there, with the stand-in service
# (example_service_test.go), and runs them: an import of this module's
# internal packages, or of anything but public modules, fails the build.
# The copy's go.sum is the core module's, so nothing is downloaded. The
# examples import the core module only (the root package, store and
# memorystore); an example that imports a nested module (a store, an
# adapter) needs that module's go.sum lines and a replace directive here,
# like the one for the core module below.
#
# First, the docs' quotes of examples: a go block whose paragraph before it
# says From [`name`](file) must be lines of the function or method name
# (ExampleDo, or a method an example calls) in file, in order and
# contiguous (indentation and blank lines aside), so that a quote cannot
# drift from the example that runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# quotes FILE prints "line<TAB>name<TAB>file" for each go block of the
# Markdown FILE that the paragraph before it introduces with
# From [`name`](file).
quotes() {
  awk '
    /^[ \t]*(```|~~~)/ {
      text = para != "" ? para : prev
      if (!code && $0 ~ /^```go[ \t]*$/ && match(text, /From \[`[A-Za-z_][A-Za-z0-9_]*`\]\([^)#]*/)) {
        m = substr(text, RSTART, RLENGTH)
        ex = m; sub(/^From \[`/, "", ex); sub(/`.*/, "", ex)
        file = m; sub(/^.*\]\(/, "", file)
        print NR "\t" ex "\t" file
      }
      code = !code; para = prev = ""; next
    }
    code { next }
    /^[ \t]*$/ { if (para != "") prev = para; para = ""; next }
    { para = para " " $0 }
  ' "$1"
}
# trimmed prints its input without indentation and blank lines.
trimmed() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | { grep -v '^$' || true; }; }
# fence FILE LINE prints the code block whose opening fence is line LINE.
fence() { awk -v start="$2" 'NR > start && /^[ \t]*```/ { exit } NR > start' "$1"; }
# gofunc FILE NAME prints the function or method NAME of FILE, with its
# doc comment.
gofunc() {
  awk -v name="$2" '
    !on && ($0 ~ "^func " name "\\(" || $0 ~ "^func \\([^)]*\\) " name "\\(") { on = 1; printf "%s", doc }
    !on { doc = /^\/\// ? doc $0 "\n" : ""; next }
    { print }
    /^}/ { exit }' "$1"
}
# excerpt QUOTE CODE reports whether QUOTE's lines are a run of CODE's.
excerpt() {
  awk 'NR == FNR { q[++n] = $0; next } { b[++m] = $0 }
    END { for (i = 0; n && i + n <= m; i++) { for (j = 1; j <= n && b[i + j] == q[j]; j++); if (j > n) exit 0 } exit 1 }' "$1" "$2"
}
status=0
while read -r md; do
  while IFS=$'\t' read -r line name file; do
    src=$(dirname "$md")/$file
    if [ ! -f "$src" ] || [ -z "$(gofunc "$src" "$name")" ]; then
      echo "check-examples: $md:$line: quotes $name, which $file does not have" >&2; status=1
    elif ! excerpt <(fence "$md" "$line" | trimmed) <(gofunc "$src" "$name" | trimmed); then
      echo "check-examples: $md:$line: the quote is not lines of $name ($file)" >&2; status=1
    fi
  done < <(quotes "$md")
done < <(find . -name '*.md' -not -path './.git/*' | sort)
[ "$status" = 0 ] || exit 1
# The core module's requirements in the module cache (a fresh machine may
# not have them yet), so that the copy below builds without the proxy.
GOWORK=off go mod download
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp example_test.go example_*_test.go go.sum "$tmp/"
cd "$tmp"
go mod init example.com/try >/dev/null 2>&1
go mod edit -require github.com/grpc-idempotency/idempotency@v0.0.0 \
  -replace "github.com/grpc-idempotency/idempotency=$root"
GOFLAGS=-mod=mod GOPROXY=off go test -count=1 .
