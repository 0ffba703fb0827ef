#!/usr/bin/env bash
# Prints the published modules of go.work (all but those of
# scripts/modules.sh) in the order they are tagged
# (docs/releasing.md): one line per step, each naming the modules that
# require, in their go.mod, only modules of this repository named on the
# lines above. With a version (scripts/release-order.sh v0.1.0) it prints
# each module's tag instead of its directory (v0.1.0,
# store/redisstore/v0.1.0, ...). The order is read from the go.mod files,
# so a new module needs no entry here; a requirement cycle fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/modules.sh
. scripts/modules.sh

version=${1:-}
root=$(go list -m -f '{{.Path}}' | head -1)
declare -A dir_of req_of
paths=()
while read -r path dir; do
  rel=${dir#"$PWD"}
  rel=${rel#/}
  unpublished "${rel:-.}" && continue
  dir_of[$path]=${rel:-.}
  paths+=("$path")
  # The modules of this repository that go.mod requires, direct or indirect.
  req_of[$path]=$(go mod edit -json "$dir/go.mod" |
    awk -v root="$root" '/^\t"Require": \[/ { on = 1; next } on && /^\t\]/ { on = 0 }
      on && /"Path":/ { gsub(/[",]/, "", $2); if ($2 == root || index($2, root "/") == 1) print $2 }')
done < <(go list -m -f '{{.Path}} {{.Dir}}')

# A module of this repository that is not in go.work would never be ready:
# say so, rather than call it a cycle.
for p in "${paths[@]}"; do
  for r in ${req_of[$p]}; do
    [ -n "${dir_of[$r]:-}" ] || { echo "release-order: ${dir_of[$p]}/go.mod requires $r, which is not a published module of go.work (scripts/check-published-requires.sh)" >&2; exit 1; }
  done
done

declare -A done_
left=${#paths[@]}
while [ "$left" -gt 0 ]; do
  step=()
  for p in "${paths[@]}"; do
    [ -z "${done_[$p]:-}" ] || continue
    ready=1
    for r in ${req_of[$p]}; do
      [ -n "${done_[$r]:-}" ] || { ready=0; break; }
    done
    [ "$ready" = 0 ] || step+=("$p")
  done
  if [ ${#step[@]} = 0 ]; then
    echo "release-order: these modules are in a requirement cycle, or require a module that is:" >&2
    for p in "${paths[@]}"; do [ -n "${done_[$p]:-}" ] || echo "  ${dir_of[$p]}" >&2; done
    exit 1
  fi
  line=()
  for p in "${step[@]}"; do
    done_[$p]=1
    left=$((left - 1))
    d=${dir_of[$p]}
    if [ -z "$version" ]; then
      line+=("$d")
    elif [ "$d" = . ]; then
      line+=("$version")
    else
      line+=("$d/$version")
    fi
  done
  echo "${line[*]}"
done
