# Sourced by the scripts that treat published and unpublished modules
# differently (docs/releasing.md#decision-315): the one place that says which
# modules of go.work are not published. They are never tagged, and no
# published module may require them.
#
# unpublished DIR: true when the module in DIR (relative to the repository's
# root, "." for the core) is not published.
unpublished() {
  case "$1" in
    examples | examples/* | integration) return 0 ;;
    *) return 1 ;;
  esac
}
