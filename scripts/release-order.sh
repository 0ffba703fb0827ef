#!/usr/bin/env bash
# Prints the published modules of go.work (scripts/modules.sh) in the
# order they are tagged (docs/releasing.md): one line per step, each naming
# the modules that require, in their go.mod, only modules of this
# repository named on the lines above. With a version
# (scripts/release-order.sh v0.1.0) it prints each module's tag instead of
# its directory (v0.1.0, store/redisstore/v0.1.0, ...). The order is read
# from the go.mod files, so a new module needs no entry here. It fails on a
# requirement cycle, and when a published module requires, directly or
# indirectly, a module that is not published: no tag could satisfy it, and
# every user of the module would carry it in their module graph.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/modules.sh

version=${1:-}
root=$(go list -m -f '{{.Path}}' | head -1)
declare -A dir_of req_of
paths=()
while read -r path dir; do
  rel=${dir#"$PWD"}
  rel=${rel#/}
  dir_of[$path]=${rel:-.}
  module_published "${dir_of[$path]}" || continue
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
    [ -n "${dir_of[$r]:-}" ] || { echo "release-order: ${dir_of[$p]}/go.mod requires $r, which is not a module of go.work" >&2; exit 1; }
    if ! module_published "${dir_of[$r]}"; then
      echo "release-order: ${dir_of[$p]} is published but its go.mod requires ${dir_of[$r]} ($r), which is not (scripts/modules.sh): a published module may require only published modules of this repository" >&2
      unpublished=1
    fi
  done
done
[ -z "${unpublished:-}" ] || exit 1

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
    else
      line+=("$(module_tag "$d" "$version")")
    fi
  done
  echo "${line[*]}"
done
