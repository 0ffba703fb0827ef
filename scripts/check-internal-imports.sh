#!/usr/bin/env bash
# Fails when the non-test code of a module other than the core (the root
# go.mod) imports one of the core's internal packages
# (github.com/grpc-idempotency/idempotency/internal/...). A module published
# on its own must build on the core's public API alone: the core's internals
# may change in any release. Test files may import the core's test rig, and
# the modules under internal/test/ (test-only) and examples/ are not published, so
# they are not checked. A module's own internal packages
# (watermillidempotency/internal/...) are its own business.
set -euo pipefail
cd "$(dirname "$0")/.."

core=github.com/grpc-idempotency/idempotency
bad=0
checked=0
while read -r dir; do
  rel=${dir#"$PWD"}
  rel=${rel#/}
  case "$rel" in
    "" | internal/* | examples | examples/*) continue ;;
  esac
  checked=$((checked + 1))
  # .Imports lists the imports of a package's non-test files only.
  hits=$(cd "$dir" && go list -e -f '{{$p := .ImportPath}}{{range .Imports}}{{$p}} imports {{.}}{{"\n"}}{{end}}' ./... |
    awk -v internal="$core/internal/" 'index($3, internal) == 1')
  if [ -n "$hits" ]; then
    echo "$hits" | sed "s|^|check-internal-imports: $rel: |" >&2
    bad=1
  fi
done < <(go list -m -f '{{.Dir}}')

if [ "$bad" = 1 ]; then
  echo "check-internal-imports: outside its tests, a module other than the core must use only the core's" >&2
  echo "public API: give the package a home in the module that needs it, or export what it needs" >&2
  exit 1
fi
echo "internal imports: $checked modules import none of the core's internal packages outside their tests"
