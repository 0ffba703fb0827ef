#!/usr/bin/env bash
# Fails when the code a user of a module other than the core (the root
# go.mod) builds imports one of the core's internal packages
# (github.com/grpc-idempotency/idempotency/internal/...). A module published
# on its own must build on the core's public API alone: the core's internals
# may change in any release. What a user builds is the module's packages
# outside its own internal/ directories and the packages they import; test
# files, and a module's own internal packages that only its tests import (the
# test services' generated code in connectidempotency/internal/connecttest),
# may use the core's test rig, since a user's build never compiles them. The
# unpublished modules (scripts/modules.sh) are not checked. A module's own internal packages (watermillidempotency/internal/...)
# are its own business.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/modules.sh
. scripts/modules.sh

core=github.com/grpc-idempotency/idempotency
bad=0
checked=0
while read -r mod dir; do
  rel=${dir#"$PWD"}
  rel=${rel#/}
  [ -n "$rel" ] || continue
  module_published "$rel" || continue
  checked=$((checked + 1))
  # The packages a user imports: those outside the module's internal/ trees.
  public=$(cd "$dir" && go list -e -f '{{.ImportPath}}' ./... | grep -v -e '/internal/' -e '/internal$' || true)
  [ -n "$public" ] || continue
  # .Imports lists the imports of a package's non-test files only; -deps
  # adds every package they reach, of which this module's are checked.
  # shellcheck disable=SC2086 # one argument per package
  hits=$(cd "$dir" && go list -e -deps -f '{{$p := .ImportPath}}{{range .Imports}}{{$p}} imports {{.}}{{"\n"}}{{end}}' $public |
    awk -v mod="$mod" -v internal="$core/internal/" '(index($1, mod "/") == 1 || $1 == mod) && index($3, internal) == 1')
  if [ -n "$hits" ]; then
    echo "$hits" | sed "s|^|check-internal-imports: $rel: |" >&2
    bad=1
  fi
done < <(go list -m -f '{{.Path}} {{.Dir}}')

if [ "$bad" = 1 ]; then
  echo "check-internal-imports: outside its tests, a module other than the core must use only the core's" >&2
  echo "public API: give the package a home in the module that needs it, or export what it needs" >&2
  exit 1
fi
echo "internal imports: $checked modules import none of the core's internal packages outside their tests"
