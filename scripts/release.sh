#!/usr/bin/env bash
# The release procedure of docs/releasing.md, run end to end.
#
#   scripts/release.sh [VERSION]                    rehearse (make release-rehearsal, CI)
#   scripts/release.sh -push REMOTE [-branch B] VERSION    release
#   scripts/release.sh -check VERSION               check a release from the public proxy
#
# In a scratch clone of HEAD, it tags the published modules
# (scripts/modules.sh) at VERSION in the order of scripts/release-order.sh,
# each step's go.mod files requiring the tags of the steps before it; it
# serves each step's tagged modules from a module proxy in a directory
# (GOPROXY=file://..., made by internal/tools/modproxy), which the next
# step's go mod tidy reads. Then, as a user would, in a fresh module per
# published module, with no replace line and GOFLAGS=-mod=mod: go get the
# module at VERSION, build a program that imports each of its packages (go
# install a command), go vet each of its packages (which compiles its tests
# and examples) and print the size of the module graph (go list -m all),
# failing when a module of this repository that is not published is in it;
# and the README's quickstart, run with the module at VERSION
# (scripts/check-quickstart.sh VERSION).
#
# A rehearsal (no -push) pushes nothing: the clone and the proxy are
# removed at the end. Its default version, v0.0.0-rehearsal.<UTC time>, is
# new at each run, so the module cache (shared, so that third-party
# modules are not downloaded again) holds no copy of it from an earlier
# run; what the run adds to the cache under this repository's module path
# is removed at the end.
#
# -push REMOTE does the same with VERSION, then pushes the release commits
# to REMOTE's branch (-branch, default main) and the tags, in one atomic
# push; -check VERSION then runs the user's side again against the public
# proxy and checksum database, with a module cache of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/modules.sh

die() { printf 'release: %s\n' "$*" >&2; exit 1; }
phase() { printf '\n--> [%4ds] %s\n' "$SECONDS" "$*"; } # the seconds since the script began
usage() { sed -n '4,6s/^# //p' "$0"; }

push="" branch=main check=""
while [ $# -gt 0 ]; do
  case "$1" in
    -push) push=${2:?-push needs a remote}; shift 2 ;;
    -branch) branch=${2:?-branch needs a branch}; shift 2 ;;
    -check) check=1; shift ;;
    -h | -help | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -le 1 ] || { usage >&2; exit 2; }
version=${1:-}
if [ -n "$push" ] || [ -n "$check" ]; then
  [ -n "$version" ] || die "-push and -check need the version"
fi
version=${version:-v0.0.0-rehearsal.$(date -u +%Y%m%d%H%M%S)}
[[ "$version" =~ ^v(0|1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
  die "version $version is not a semantic version vX.Y.Z[-pre] with X 0 or 1 (a major version above 1 changes every module path)"

modpath=$(GOWORK=off go list -m)     # the root module's path
upstream=$(go env GOPROXY)           # where third-party modules come from
modcache=$(go env GOMODCACHE)
userflags=${GOFLAGS:-}
tmp=$(mktemp -d)
work=$tmp/repo proxy=$tmp/proxy

# ours_in_cache prints the files and directories of the module cache that
# hold a module of this repository at $version.
ours_in_cache() {
  local top=$modcache/${modpath%/*} dl=$modcache/cache/download/${modpath%/*}
  [ ! -d "$top" ] || find "$top" -maxdepth 6 -type d -name "*@$version" -path "$modcache/$modpath*" -prune
  [ ! -d "$dl" ] || find "$dl" -path "$modcache/cache/download/$modpath*/@v/$version.*"
}
forget_ours() {
  local p
  while read -r p; do
    [ -n "$p" ] || continue
    chmod -R u+w "$p" 2>/dev/null || true
    rm -rf "$p"
  done < <(ours_in_cache)
  # The versions the go command listed, and what is left empty.
  local dl=$modcache/cache/download/$modpath
  [ ! -d "$dl" ] || {
    find "$dl" -path '*/@v/list' -exec sed -i "/^${version//./\\.}\$/d" {} +
    find "$dl" -path '*/@v/list' -empty -delete
    find "$dl" "$modcache/$modpath" -depth -type d -empty -delete 2>/dev/null || true
    rmdir "${dl%/*}" "$modcache/${modpath%/*}" 2>/dev/null || true
  }
}
cleanup() {
  [ -n "$push" ] || [ -n "$check" ] || forget_ours
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# consumers checks, as a user does, every published module of directories
# $@ (relative to the repository's root) at $version, from GOPROXY.
consumers() {
  local d mp c pkgs libs mains n bad=0
  export GOFLAGS="${userflags:+$userflags }-mod=mod"
  for d in "$@"; do
    mp=$(module_path_of "$d")
    phase "user of $mp@$version"
    c=$tmp/consumers/${d//\//-}
    mkdir -p "$c" "$tmp/bin"
    (
      cd "$c"
      go mod init example.com/consumer >/dev/null 2>&1
      run go get "$mp@$version"
      # The module's packages: imported by a program, commands installed.
      pkgs=$(go list -f "{{if eq .Module.Path \"$mp\"}}{{.ImportPath}} {{.Name}}{{end}}" "$mp/...") ||
        die "$mp@$version: go list $mp/... failed (above)"
      pkgs=$(sed '/^$/d' <<<"$pkgs")
      [ -n "$pkgs" ] || die "$mp@$version: go list found no package in it"
      libs=$(awk '$2 != "main" && $1 !~ /\/internal(\/|$)/ { print $1 }' <<<"$pkgs")
      mains=$(awk '$2 == "main" && $1 !~ /\/internal(\/|$)/ { print $1 }' <<<"$pkgs")
      if [ -n "$libs" ]; then
        { echo 'package main'; echo; echo 'import ('; sed 's/.*/\t_ "&"/' <<<"$libs"; echo ')'; echo; echo 'func main() {}'; } >main.go
        run go build -o /dev/null .
        echo "built a program that imports its packages: $(tr '\n' ' ' <<<"$libs")"
      fi
      for p in $mains; do
        # go install pkg@version outside any module: what a user runs, and
        # refused when the module's go.mod has a replace directive.
        (cd "$tmp" && GOFLAGS=$userflags GOBIN=$tmp/bin run go install "$p@$version")
        "$tmp/bin/${p##*/}" --help >/dev/null 2>&1 || die "$p@$version: ${p##*/} --help failed"
        echo "installed $p@$version; ${p##*/} --help runs"
      done
      # go vet compiles each package's tests and examples.
      run go vet $(awk '{ print $1 }' <<<"$pkgs")
      echo "go vet passed on its packages, their tests and examples: $(wc -l <<<"$pkgs") packages"
      ! grep -q '^replace' go.mod || die "$mp@$version: the user's go.mod has a replace directive"
      n=$(go list -m all | wc -l)
      printf 'module graph of a user of %s: %d lines of go list -m all\n' "$mp" "$n"
      local m ok=1
      for m in $(go list -m -f '{{.Path}}' all | awk -v p="$modpath" '$1 == p || index($1, p "/") == 1'); do
        rel=${m#"$modpath"}
        rel=${rel#/}
        module_published "${rel:-.}" || { echo "release: a user of $mp@$version has $m, which is not published, in its module graph" >&2; ok=0; }
      done
      [ "$ok" = 1 ] || exit 1
    ) || bad=1
  done
  phase "the README's quickstart with $modpath@$version"
  GOFLAGS=$userflags "$work/scripts/check-quickstart.sh" "$version" || bad=1
  [ "$bad" = 0 ] || die "a user's check failed (above)"
}
# run runs a go command quietly, and shows its output when it fails.
run() {
  local out
  out=$("$@" 2>&1) || { echo "$out" >&2; die "failed: $* (in $PWD)"; }
}
# module_path_of DIR prints the path of the module in DIR of the clone.
module_path_of() { awk '$1 == "module" { gsub(/"/, "", $2); print $2; exit }' "$work/$1/go.mod"; }

export GOWORK=off

if [ -n "$check" ]; then
  # After -push: the user's side again, from the public proxy (GOPROXY and
  # GOSUMDB as they are), with a module cache of its own so that nothing
  # comes from this machine's.
  export GOMODCACHE=$tmp/modcache
  git clone -q "$root" "$work"
  git -C "$work" checkout -q "$(module_tag . "$version")" || die "no tag $version in this clone: fetch the tags"
  order=$(cd "$work" && GOWORK=$work/go.work scripts/release-order.sh) || die "no release order (above)"
  mapfile -t steps <<<"$order"
  consumers $(printf '%s ' "${steps[@]}")
  # The release's last commit: its go.sum files have the checksums that
  # the release's local proxy gave; the public proxy must serve the same.
  last=${steps[-1]%% *}
  git -C "$work" checkout -q "$(module_tag "$last" "$version")"
  phase "the checksums of the release's go.sum files are those $upstream serves"
  for d in $(printf '%s ' "${steps[@]}"); do
    mp=$(module_path_of "$d")
    json=$(cd "$tmp" && GOFLAGS=$userflags go mod download -json "$mp@$version") || die "go mod download $mp@$version failed (above)"
    sum=$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$json")
    modsum=$(sed -n 's/^\t"GoModSum": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
    [ -n "$sum" ] && [ -n "$modsum" ] || die "go mod download -json $mp@$version gave no checksums: $json"
    recorded=$(cd "$work" && git ls-files -z -- '*go.sum' | xargs -0 grep -h "^$mp $version[ /]" | sort -u || true)
    while read -r line; do
      [ -n "$line" ] || continue
      case "$line" in
        "$mp $version $sum" | "$mp $version/go.mod $modsum") ;;
        *) die "a go.sum of the release has \"$line\"; $upstream serves $sum, go.mod $modsum" ;;
      esac
    done <<<"$recorded"
    echo "$mp@$version: $sum ($(grep -c . <<<"$recorded" || true) go.sum lines agree)"
  done
  phase "done: every published module at $version works for a user of $upstream"
  exit 0
fi

phase "a scratch clone of HEAD"
head=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain)" ]; then
  [ -z "$push" ] || die "the work tree has uncommitted changes: release from a clean checkout"
  echo "note: the work tree has uncommitted changes; they are not part of this rehearsal, which is made from HEAD ($head)"
fi
git clone -q --no-checkout "$root" "$work"
git -C "$work" checkout -q -b "release-$version" "$head"
if [ -z "$(git -C "$work" config user.email || true)" ]; then
  [ -z "$push" ] || die "git user.email is not set: the release commits and tags need their author"
  git -C "$work" config user.name "release rehearsal"
  git -C "$work" config user.email "rehearsal@invalid"
fi
if [ -z "$push" ] && [ -n "$(ours_in_cache)" ]; then
  ours_in_cache >&2
  die "the module cache already holds modules of $modpath at $version (above): rehearse another version"
fi
echo "HEAD $head in $work; version $version"

phase "the release order (scripts/release-order.sh)"
order=$(cd "$work" && GOWORK=$work/go.work scripts/release-order.sh) && [ -n "$order" ] ||
  die "no release order (above): nothing was tagged"
mapfile -t steps <<<"$order"
printf '%s\n' "${steps[@]}"

# The module proxy's tool, built from tools.mod.
(cd "$work" && GOFLAGS=-mod=readonly go build -modfile=tools.mod -o "$tmp/modproxy" internal/tools/modproxy/main.go)
export GOPROXY="file://$proxy,$upstream"
# The checksum database knows nothing of these tags until they are public.
export GONOSUMDB="$modpath${GONOSUMDB:+,$GONOSUMDB}" GOPRIVATE="" GONOPROXY=""

tags=()
for i in "${!steps[@]}"; do
  phase "step $((i + 1)) of ${#steps[@]}: ${steps[$i]}"
  for d in ${steps[$i]}; do
    (
      cd "$work/$d"
      # This repository's modules it requires, and its replace directives.
      reqs=$(go mod edit -print | awk '/^require \(/ { b = 1; next } /^\)/ { b = 0 } /^require [^(]/ { print $2 } b { print $1 }' |
        awk -v p="$modpath" '$1 == p || index($1, p "/") == 1')
      repl=$(go mod edit -print | awk '/^replace \(/ { b = 1; next } /^\)/ { b = 0 } /^replace [^(]/ { print $2 } b { print $1 }')
      args=()
      for r in $reqs; do args+=("-require=$r@$version"); done
      for r in $repl; do
        [[ "$r" == "$modpath" || "$r" == "$modpath"/* ]] || die "$d/go.mod replaces $r: a published module's go.mod may have no replace directive (go install refuses it)"
        args+=("-dropreplace=$r")
      done
      [ ${#args[@]} = 0 ] || run go mod edit "${args[@]}"
      run go mod tidy
      run go build ./...
      run go list -deps -test ./...
    ) || die "step $((i + 1)): $d (above)"
  done
  git -C "$work" add -A
  if ! git -C "$work" diff --cached --quiet; then
    git -C "$work" diff --cached --stat
    git -C "$work" commit -q -m "release $version: ${steps[$i]} require $version of this repository's modules"
  fi
  served=""
  for d in ${steps[$i]}; do
    tag=$(module_tag "$d" "$version")
    ! git -C "$work" rev-parse -q --verify "refs/tags/$tag" >/dev/null || die "tag $tag exists already"
    git -C "$work" tag -a -m "$(module_path_of "$d") $version" "$tag"
    tags+=("$tag")
    served+="$(module_path_of "$d") $version $d $tag"$'\n'
  done
  "$tmp/modproxy" -repo "$work" -proxy "$proxy" <<<"$served"
  echo "tagged $(git -C "$work" rev-parse --short HEAD) and served from the proxy: ${tags[*]: -$(wc -w <<<"${steps[$i]}")}"
done

dirs=$(printf '%s ' "${steps[@]}")
consumers $dirs

if [ -n "$push" ]; then
  url=$(git remote get-url "$push" 2>/dev/null || echo "$push")
  phase "pushing $branch and ${#tags[@]} tags to $url"
  git -C "$work" push --atomic "$url" "release-$version:refs/heads/$branch" "${tags[@]/#/refs/tags/}"
  phase "released $version; now check it from the public proxy: scripts/release.sh -check $version"
else
  phase "rehearsal of $version passed: ${#tags[@]} modules tagged in a scratch clone and served from $proxy (removed); nothing was pushed"
fi
