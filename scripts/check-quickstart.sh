#!/usr/bin/env bash
# The README's quickstart, run as a newcomer would: its proto, its shell
# commands (getting options.proto from the module cache), its buf.yaml and
# buf.gen.yaml, its main.go, in an empty module named example.com/shop; the
# output must be the one the README shows. The go install lines must name
# the versions tools.mod pins; the tools are built from tools.mod, and the
# module is this checkout (a replace), so nothing is downloaded but what
# go mod tidy checks (the test dependencies of dependencies) when the
# module cache does not hold it yet, as on a fresh machine.
#
# With a version (scripts/check-quickstart.sh v0.1.0), the module is the
# one GOPROXY serves at that version, fetched with the Install section's
# go get and no replace, as a user gets it: scripts/release.sh runs it so
# against the release's module proxy.
set -euo pipefail
version=${1:-}
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# block N prints the Nth fenced code block of the README's Quickstart.
block() {
  awk -v want="$1" '
    /^## / { inside = ($0 == "## Quickstart") }
    !inside { next }
    /^```/ { if (fence) { fence = 0; if (n == want) exit; next } fence = 1; n++; next }
    fence && n == want { print }
  ' "$root/README.md"
}
fail() { echo "check-quickstart: $*" >&2; exit 1; }

# The go install lines name the pinned versions.
while read -r pkg version; do
  case "$pkg" in
    github.com/bufbuild/buf/*) mod=github.com/bufbuild/buf ;;
    google.golang.org/protobuf/*) mod=google.golang.org/protobuf ;;
    *) mod=$pkg ;;
  esac
  pinned=$(GOWORK=off go list -modfile=tools.mod -m -f '{{.Version}}' "$mod")
  [ "$version" = "$pinned" ] || fail "README installs $pkg@$version, tools.mod pins $pinned"
done < <(block 2 | sed -n 's/^go install \([^@]*\)@\(.*\)$/\1 \2/p')
[ "$(block 2 | grep -c '^go install')" = 3 ] || fail "expected three go install lines in the quickstart"

mkdir -p "$tmp/bin" "$tmp/shop/proto/shop/v1"
GOWORK=off go build -modfile=tools.mod -o "$tmp/bin/" \
  github.com/bufbuild/buf/cmd/buf \
  google.golang.org/protobuf/cmd/protoc-gen-go \
  google.golang.org/grpc/cmd/protoc-gen-go-grpc
export PATH="$tmp/bin:$PATH"

cd "$tmp/shop"
block 1 >proto/shop/v1/shop.proto
block 3 >buf.yaml
block 4 >buf.gen.yaml
block 5 >main.go
block 6 >want.txt
go mod init example.com/shop >/dev/null 2>&1
proxy=$(go env GOPROXY)
if [ -n "$version" ]; then
  export GOWORK=off GOFLAGS=-mod=mod
  # The README's Install command, at the version.
  install=$(sed -n '/^## Install$/,/^## /s/^\(go get github.com\/grpc-idempotency\/idempotency\)$/\1/p' "$root/README.md")
  [ "$install" = "go get github.com/grpc-idempotency/idempotency" ] || fail "found no go get line in the README's Install section"
  out=$($install@"$version" 2>&1) || { echo "$out" >&2; fail "$install@$version failed (above)"; }
else
  cp "$root/go.sum" .
  go mod edit -require github.com/grpc-idempotency/idempotency@v0.0.0 \
    -replace "github.com/grpc-idempotency/idempotency=$root"
  export GOWORK=off GOFLAGS=-mod=mod GOPROXY=off
fi

# The README's commands that fetch options.proto, without the installs.
block 2 | grep -v '^go install' | grep -v '^$' >fetch.sh
bash -euo pipefail fetch.sh
[ -f third_party/idempotency/v1/options.proto ] || fail "the quickstart's commands did not fetch options.proto"

buf generate
[ -f gen/shop/v1/shop.pb.go ] || fail "buf generate wrote no gen/shop/v1/shop.pb.go"
[ ! -e gen/idempotency ] || fail "buf generate wrote code for options.proto"
GOPROXY=$proxy go mod tidy >/dev/null
go run . >got.txt
diff -u want.txt got.txt || fail "main.go printed something else than the README shows"
echo "quickstart ok${version:+ at $version}: $(tr '\n' ' ' <got.txt)"
