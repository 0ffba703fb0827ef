#!/usr/bin/env bash
# Checks the relative links of every Markdown file: for each [text](path)
# and [text](path#anchor) outside code blocks, the path exists (relative to
# the linking file) and, for a Markdown target, the anchor is one of its
# headings as GitHub names them (lower case, punctuation dropped, spaces to
# hyphens, "-1", "-2" for repeats) or an explicit <a id="anchor"></a> (or
# <a name="anchor">) outside code. Links with a scheme (https:, mailto:)
# are not checked. Usage: scripts/check-links.sh [file.md ...]
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
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  while IFS=$'\t' read -r line target; do
    case "$target" in
      *:*) continue ;; # https:, mailto:
    esac
    path=${target%%#*}
    anchor=
    [[ "$target" == *"#"* ]] && anchor=${target#*#}
    if [ -z "$path" ]; then
      file=$f
    else
      file=$dir/$path
    fi
    if [ ! -e "$file" ]; then
      echo "$f:$line: $target: no such file" >&2
      broken=$((broken + 1))
      continue
    fi
    # grep reads every anchor (no -q): with -q it stops at the first match,
    # awk then dies of SIGPIPE, and pipefail made a found anchor "broken".
    if [ -n "$anchor" ] && [[ "$file" == *.md ]] && ! anchors "$file" | grep -xF -- "$anchor" >/dev/null; then
      echo "$f:$line: $target: no heading or <a id> with that anchor" >&2
      broken=$((broken + 1))
    fi
  done < <(links "$f")
done

if [ "$broken" -gt 0 ]; then
  echo "$broken broken link(s)" >&2
  exit 1
fi
echo "${#files[@]} Markdown files, links ok"
