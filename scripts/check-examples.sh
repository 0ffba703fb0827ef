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
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
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
