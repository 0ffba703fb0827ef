#!/usr/bin/env bash
# Checks the relative links of every Markdown file: for each [text](path)
# and [text](path#anchor) outside code blocks, the path exists (relative to
# the linking file) and, for a Markdown target, the anchor is one of its
# headings as GitHub names them (lower case, punctuation dropped, spaces to
# hyphens, "-1", "-2" for repeats) or an explicit <a id="anchor"></a> (or
# <a name="anchor">) outside code. Links with a scheme (https:, mailto:)
# are not checked. Then the same for the links of the Go files to the
# repository's files: a https://github.com/grpc-idempotency/idempotency/blob/main/
# URL, or a path to a Markdown file under docs/ (from the repository root, or
# from the Go file's directory when it starts with ../), with or without an
# anchor: the file exists and, for a Markdown target, holds the anchor (so a
# comment's docs/semantics/claims.md#decision-9 is checked as a link is).
# Usage: scripts/check-links.sh [file.md ...] (the Go files are checked
# when no file is named).
set -euo pipefail
cd "$(dirname "$0")/.."

# The anchors of a Markdown file's headings and <a id> tags, one per line.
anchors() {
  LC_ALL=C awk '
    /^[ \t]*(```|~~~)/ { code = !code; next }
    code { next }
    {
      s = $0
      gsub(/`[^`]*`/, "", s) # inline code
      while (match(s, /<a (id|name)="[^"]+"/)) {
        a = substr(s, RSTART, RLENGTH - 1)
        sub(/^<a (id|name)="/, "", a)
        print a
        s = substr(s, RSTART + RLENGTH)
      }
    }
    !/^#{1,6}[ \t]/ { next }
    {
      h = $0
      sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#*[ \t]*$/, "", h)
      h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
      n = seen[h]++
      print (n ? h "-" n : h)
    }' "$1"
}

# The links of a Markdown file outside code blocks, as "line<TAB>target".
links() {
  awk '
    /^[ \t]*(```|~~~)/ { code = !code; next }
    code { next }
    {
      s = $0
      gsub(/`[^`]*`/, "", s) # inline code
      while (match(s, /\]\([^)[:space:]]+\)/)) {
        print NR "\t" substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH)
      }
    }' "$1"
}

if [ "$#" -eq 0 ]; then
  mapfile -t files < <(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||' | sort)
else
  files=("$@")
fi

broken=0
# check SOURCE LINE TARGET FILE: FILE (the target's path, resolved) exists
# and, for a Markdown file, holds the target's #anchor, if it names one.
check() {
  local anchor=
  [[ "$3" == *"#"* ]] && anchor=${3#*#}
  if [ ! -e "$4" ]; then
    echo "$1:$2: $3: no such file" >&2
    broken=$((broken + 1))
    return
  fi
  # grep reads every anchor (no -q): with -q it stops at the first match,
  # awk then dies of SIGPIPE, and pipefail made a found anchor "broken".
  if [ -n "$anchor" ] && [[ "$4" == *.md ]] && ! anchors "$4" | grep -xF -- "$anchor" >/dev/null; then
    echo "$1:$2: $3: no heading or <a id> with that anchor" >&2
    broken=$((broken + 1))
  fi
}

for f in "${files[@]}"; do
  dir=$(dirname "$f")
  while IFS=$'\t' read -r line target; do
    case "$target" in
      *:*) continue ;; # https:, mailto:
    esac
    path=${target%%#*}
    if [ -z "$path" ]; then
      check "$f" "$line" "$target" "$f"
    else
      check "$f" "$line" "$target" "$dir/$path"
    fi
  done < <(links "$f")
done

# The links of the Go files: "file<TAB>line<TAB>target", the target as written.
repo_url=https://github.com/grpc-idempotency/idempotency/blob/main/
go_links() {
  find . -name '*.go' -not -path './.git/*' -print0 | sort -z |
    xargs -0 grep -noE "(${repo_url//./\\.}[A-Za-z0-9_./-]+|(\.\./)*docs/[A-Za-z0-9_./-]*\.md)(#[A-Za-z0-9_-]+)?" |
    sed -E 's|^\./||; s|^([^:]*):([0-9]+):|\1\t\2\t|'
}

golinks=0
if [ "$#" -eq 0 ]; then
  while IFS=$'\t' read -r f line target; do
    golinks=$((golinks + 1))
    target=${target%.} # a full stop after the link
    path=${target%%#*}
    case "$path" in
      "$repo_url"*) check "$f" "$line" "$target" "${path#"$repo_url"}" ;;
      ../*) check "$f" "$line" "$target" "$(dirname "$f")/$path" ;;
      *) check "$f" "$line" "$target" "$path" ;;
    esac
  done < <(go_links)
fi

if [ "$broken" -gt 0 ]; then
  echo "$broken broken link(s)" >&2
  exit 1
fi
echo "${#files[@]} Markdown files, links ok"
if [ "$#" -eq 0 ]; then
  echo "$golinks links from the Go files to the repository's files, ok"
fi
