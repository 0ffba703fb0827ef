#!/usr/bin/env bash
# Fails when a published module of this repository requires an unpublished
# one (examples, examples/payments/gen, integration: scripts/modules.sh), in
# its go.mod or through the imports of any of its packages, tests included,
# or requires a module of this repository that go.work does not have (the
# old test-rig modules under internal/test/). A user's `go mod tidy` must
# find every requirement of a published module on the module proxy, and
# their module graph must hold nothing of this repository but what they use
# (docs/releasing.md#decision-315).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/modules.sh
. scripts/modules.sh

root=$(go list -m -f '{{.Path}}' | head -1)
declare -A dir_of
while read -r path dir; do
  rel=${dir#"$PWD"}
  rel=${rel#/}
  dir_of[$path]=${rel:-.}
done < <(go list -m -f '{{.Path}} {{.Dir}}')

bad=0
checked=0
fail() { echo "check-published-requires: $*" >&2; bad=1; }
for path in "${!dir_of[@]}"; do
  rel=${dir_of[$path]}
  module_published "$rel" || continue
  checked=$((checked + 1))
  # The go.mod's requirements, direct or indirect.
  while read -r req; do
    case "$req" in "$root" | "$root"/*) ;; *) continue ;; esac
    if [ -z "${dir_of[$req]:-}" ]; then
      fail "$rel/go.mod requires $req, which is not a module of go.work"
    elif ! module_published "${dir_of[$req]}"; then
      fail "$rel/go.mod requires $req, which is not published"
    fi
  done < <(go mod edit -json "$rel/go.mod" | sed -n 's/^\t\t\t"Path": "\(.*\)",\{0,1\}$/\1/p')
  # The packages its packages and their tests import (in the workspace, where
  # an import of an unpublished module builds without a requirement).
  while read -r pkg mod; do
    [ -n "${mod:-}" ] || continue
    [ -n "${dir_of[$mod]:-}" ] && ! module_published "${dir_of[$mod]}" &&
      fail "$rel: a package or its tests import $pkg, of the unpublished module ${dir_of[$mod]}"
  done < <(cd "$rel" && go list -e -deps -test -f '{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}' ./... | sort -u)
done

if [ "$bad" = 1 ]; then
  echo "check-published-requires: a published module's tests that need a rig or an example move into that" >&2
  echo "module (its own internal/ packages) or into the integration module (docs/releasing.md)" >&2
  exit 1
fi
echo "published requirements: $checked published modules require no unpublished module of this repository"
