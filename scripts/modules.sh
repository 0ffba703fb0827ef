# Sourced by the scripts that tell published modules from the others
# (release-order.sh, release.sh, check-modules-listed.sh): the one place
# that says which modules of go.work are published.
#
# A published module is one a user requires: it is tagged at each release,
# served by the module proxy, and may require only published modules of
# this repository (scripts/release-order.sh fails otherwise). The others
# are built only in this repository, with go.work or their replace
# directives, and never tagged: the examples (examples, examples/...), the
# integration tests (integration) and any module under internal/.

# module_published DIR succeeds when the module in DIR (relative to the
# repository's root, "." for the root module) is published.
module_published() {
  case "$1" in
    internal/* | examples | examples/* | integration) return 1 ;;
    *) return 0 ;;
  esac
}

# module_tag DIR VERSION prints the tag of the module in DIR at VERSION: the
# version alone for the root module, else the directory and the version
# (store/redisstore/v0.1.0), as the go command reads tags of modules in
# subdirectories.
module_tag() {
  if [ "$1" = . ]; then echo "$2"; else echo "$1/$2"; fi
}
