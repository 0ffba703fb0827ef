#!/usr/bin/env bash
# Fails when the core module (the root go.mod) requires a module outside
# its allowlist: a service that imports the root package must not pull a
# database driver, a telemetry SDK or a gateway (STYLE.md rule 13). A
# package that needs one is a module of its own (docs/releasing.md lists
# them). The allowlist is grpc, protobuf and the few small modules the core
# needs, plus the golang.org/x modules that grpc itself requires, read from
# the module graph so that a grpc upgrade does not need an edit here.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK=off

allowed=(
  google.golang.org/grpc
  google.golang.org/protobuf
  google.golang.org/genproto/googleapis/rpc     # google.rpc.ErrorInfo and friends
  github.com/google/go-cmp                      # tests
  github.com/google/uuid                        # the client's keys
  github.com/grpc-ecosystem/go-grpc-middleware/v2 # the client's backoff
  go.uber.org/goleak                            # tests
  github.com/anishathalye/porcupine             # storetest's linearizability check; no dependencies of its own
)
grpc=$(go list -m -f '{{.Path}}@{{.Version}}' google.golang.org/grpc)
while read -r mod; do
  allowed+=("$mod")
done < <(go mod graph | awk -v g="$grpc" '$1 == g && $2 ~ /^golang\.org\/x\// { sub(/@.*/, "", $2); print $2 }')

# The modules go.mod requires, direct and indirect.
required=$(go mod edit -json | awk '/^\t"Require": \[/ { on = 1; next } on && /^\t\]/ { on = 0 } on && /"Path":/ { gsub(/[",]/, "", $2); print $2 }')
[ -n "$required" ] || { echo "check-core-deps: read no requirement from go.mod" >&2; exit 1; }

bad=0
for mod in $required; do
  ok=0
  for a in "${allowed[@]}"; do [ "$mod" = "$a" ] && ok=1 && break; done
  if [ "$ok" = 0 ]; then
    echo "check-core-deps: the core module requires $mod, which is not on the allowlist" >&2
    bad=1
  fi
done
if [ "$bad" = 1 ]; then
  echo "check-core-deps: move the package that needs it to a module of its own, or, if the core" >&2
  echo "truly needs it, add it to the allowlist in scripts/check-core-deps.sh" >&2
  exit 1
fi
echo "core module requirements: $(echo $required | wc -w) modules, all on the allowlist"
