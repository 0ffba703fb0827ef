#!/usr/bin/env bash
# Fails when a module of go.work is missing from the tables that describe
# the modules to their readers, or a table names a module go.work does not
# have: docs/releasing.md's modules table (a row per module, by directory)
# and the README's Packages table (a row per published module, by import
# path, marked "own"; scripts/modules.sh says which modules are
# published). What each row says is written by hand; which rows there are
# is checked against `go list -m` here. It fails, too, when a go.mod of the
# tree is not a module of go.work.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/modules.sh

root=$(go list -m -f '{{.Path}}' | head -1)
bad=0
fail() { echo "check-modules-listed: $*" >&2; bad=1; }

# The modules table of docs/releasing.md: the rows up to the first blank
# line after "| Directory | Module |".
releasing=$(awk '/^\| Directory \| Module \|/ { on = 1; next } on && /^$/ { exit } on' docs/releasing.md |
  sed -n 's/^| `\([^`]*\)` |.*/\1/p')
# The README's Packages table: the rows whose second column is "own".
readme=$(sed -n 's/^| `\([^`]*\)` | own |.*/\1/p' README.md)
[ -n "$releasing" ] || fail "found no modules table in docs/releasing.md"
[ -n "$readme" ] || fail "found no module marked own in the README's Packages table"

dirs=()
while read -r path dir; do
  rel=${dir#"$PWD"}
  rel=${rel#/}
  rel=${rel:-.}
  dirs+=("$rel")
  grep -qxF -- "$rel" <<<"$releasing" || fail "docs/releasing.md's modules table has no row for $rel"
  # The root module's packages are the rows marked core.
  if [ "$rel" != . ] && module_published "$rel"; then
    grep -qxF -- "$path" <<<"$readme" || fail "the README's Packages table has no row for $path (module: own)"
  fi
done < <(go list -m -f '{{.Path}} {{.Dir}}')

# Every go.mod of the tree is a module of go.work: the lists above, make
# lint, make test and the release order read go.work, so a module left out
# of it would be in none of them.
while read -r gomod; do
  rel=$(dirname "$gomod")
  printf '%s\n' "${dirs[@]}" | grep -qxF -- "$rel" || fail "$gomod is not a module of go.work: add ./$rel to its use list"
done < <(git ls-files --cached --others --exclude-standard -- ':(glob)**/go.mod' ':(exclude,glob)**/testdata/**')

while read -r rel; do
  [ -n "$rel" ] || continue
  printf '%s\n' "${dirs[@]}" | grep -qxF -- "$rel" || fail "docs/releasing.md's modules table names $rel, which is not a module of go.work"
done <<<"$releasing"
while read -r path; do
  [ -n "$path" ] || continue
  rel=${path#"$root"/}
  printf '%s\n' "${dirs[@]}" | grep -qxF -- "$rel" || fail "the README's Packages table marks $path own, which is not a module of go.work"
done <<<"$readme"

[ "$bad" = 0 ] || exit 1
echo "modules listed: the ${#dirs[@]} modules of go.work in docs/releasing.md, the published ones in the README"
