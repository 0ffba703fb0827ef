#!/usr/bin/env bash
# Checks the Promela model of the protocol, model/idempotency.pml, with
# Spin (model/README.md says what it models and what it leaves out):
#
#  1. every safety property (the model's assertions and its end states)
#     under each abandon policy, with 2 servers serving 2 calls, then
#     under block with 3 calls; MODEL_DEEP=1 checks 3 calls under every
#     policy (about 7 minutes on 2 cores);
#  2. the liveness property orphan_ends under each policy, with weak
#     fairness;
#  3. each known bad variant (a MUTANT_ macro of the model): the check must
#     find a counterexample that breaks the property the variant is known
#     to break (named in the list below), whose trail is printed, trimmed to the
#     model's own lines (calls c0, c1, ..., the operator op, the clock's
#     ticks).
#
# Each run prints its states stored and matched, its depth and its time.
# The script fails when spin or gcc is missing, when a property fails, or
# when a mutant is not caught, or is caught breaking another property.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v spin >/dev/null || { echo "FATAL: spin is not installed (Debian: apt-get install spin)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "FATAL: gcc is not installed" >&2; exit 1; }

model=model/idempotency.pml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/"
cd "$work"

policies=(unset rerun block recover) # -DPOLICY=0..3 (abandon.go)
failed=0

# figures prints the figures of pan's output in $1.
figures() {
  local stored matched depth secs
  stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$1" | head -1)
  matched=$(sed -n 's/^ *\([0-9.e+]*\) states, matched.*/\1/p' "$1" | head -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' "$1" | head -1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' "$1" | head -1)
  printf '%s stored, %s matched, depth %s, %s s' "$stored" "$matched" "$depth" "${secs:-0}"
}

# check LABEL DEFINES CCFLAGS PANFLAGS: builds and runs pan; sets $errors
# to the number of errors pan found and prints the figures.
check() {
  local label=$1 defs=$2 cc=$3 panflags=$4
  rm -f ./*.trail
  # shellcheck disable=SC2086 # the flags are words
  spin $defs -a idempotency.pml >spin.out 2>&1 || { cat spin.out; echo "FATAL: spin -a $defs failed" >&2; exit 1; }
  # shellcheck disable=SC2086
  gcc -O2 -w $cc -o pan pan.c || { echo "FATAL: gcc failed for $label" >&2; exit 1; }
  # shellcheck disable=SC2086
  ./pan $panflags >pan.out 2>&1 || true
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
  if [ -z "$errors" ]; then
    cat pan.out
    echo "FATAL: pan gave no result for $label" >&2
    exit 1
  fi
  if grep -q 'Search not completed' pan.out && [ "$errors" = 0 ]; then
    cat pan.out
    echo "FATAL: $label: the search did not complete (depth bound)" >&2
    exit 1
  fi
  printf '  %-58s %s\n' "$label" "$(figures pan.out)"
}

# replay DEFINES: replays the counterexample of the last check into
# $work/trail.out, and sets $broken to the property it breaks: the name of
# the violated assertion (its comment in the model), "acceptance cycle"
# (a liveness property) or "invalid end state" (a deadlock).
replay() {
  local defs=$1 line
  # shellcheck disable=SC2086
  spin $defs -t idempotency.pml >trail.out 2>&1 || true
  broken=""
  line=$(sed -n 's/^spin: idempotency.pml:\([0-9]*\), Error: assertion violated.*/\1/p' trail.out | head -1)
  if [ -n "$line" ]; then
    broken=$(sed -n "${line}p" idempotency.pml | sed -n 's|.*/\* *\([a-z_]*\) *\*/.*|\1|p')
    broken=${broken:-the assertion at line $line}
  elif grep -q 'acceptance cycle' pan.out; then
    broken="acceptance cycle"
  elif grep -q 'invalid end state' pan.out; then
    broken="invalid end state"
  fi
}

# trail DEFINES: the counterexample of the last check, trimmed to the
# model's printf lines, and the property it breaks.
trail() {
  replay "$1"
  grep -vE '^ltl |^[[:space:]]+[A-Za-z_]+(\[[0-9]+\])?(\([0-9]+\))?(:[A-Za-z_]+)? = |^ *[0-9]+:[[:space:]]+proc|processes created|^#processes|^spin: trail ends|^Never claim' trail.out |
    sed -e 's/^[[:space:]]*/      /' | head -60
  echo "      => broken: ${broken:-unknown}"
}

safety() { # safety LABEL DEFINES
  check "$1" "$2" "-DSAFETY -DNOCLAIM -DCOLLAPSE" "-m1000000"
  if [ "$errors" != 0 ]; then
    echo "  FAIL: $1"
    trail "$2"
    failed=1
  fi
}

echo "==> safety: one_start, one_completion, answers_agree, purge_fences, claim_kept, end states"
for i in "${!policies[@]}"; do
  safety "policy ${policies[$i]}, 2 servers, 2 calls" "-DPOLICY=$i -DCALLS=2"
done
if [ "${MODEL_DEEP:-0}" = 1 ]; then
  for i in "${!policies[@]}"; do
    safety "policy ${policies[$i]}, 2 servers, 3 calls" "-DPOLICY=$i -DCALLS=3"
  done
else
  safety "policy block, 2 servers, 3 calls" "-DPOLICY=2 -DCALLS=3"
fi

echo "==> liveness: orphan_ends (weak fairness)"
for i in "${!policies[@]}"; do
  label="policy ${policies[$i]}, 2 servers, 2 calls"
  check "$label" "-DPOLICY=$i -DCALLS=2" "-DCOLLAPSE" "-m1000000 -a -f -N orphan_ends"
  if [ "$errors" != 0 ]; then
    echo "  FAIL: $label"
    trail "-DPOLICY=$i -DCALLS=2"
    failed=1
  fi
done

# Each mutant: the calls its counterexample needs, then each policy under
# which it must be caught with the property its counterexample breaks
# (POLICY:property): a mutant caught for another reason (a deadlock, another
# assertion) fails the check, since the variant it stands for would then
# not be shown to break what it breaks.
mutants=(
  "RELEASE_NO_TOKEN 2 0:claim_kept 1:claim_kept 2:claim_kept 3:claim_kept"
  "COMPLETE_NO_FENCE 2 0:claim_kept 1:claim_kept 2:claim_kept 3:claim_kept"
  "TAKEOVER_SAME_TOKEN 2 1:claim_kept 3:claim_kept"
  "TAKEOVER_NO_ATTEMPT 2 3:one_start"
  "RELEASE_AFTER_LAPSE 2 2:one_start 3:one_start"
  "TAKENOVER_RELEASES 3 3:one_start"
  "RESOLVE_SAME_TOKEN 2 1:answers_agree 2:answers_agree 3:answers_agree"
)
echo "==> mutants: each known bad variant must be caught, breaking the property it breaks"
for row in "${mutants[@]}"; do
  read -r m n ps <<<"$row"
  first=1
  for p in $ps; do
    i=${p%%:*} want=${p#*:}
    defs="-DPOLICY=$i -DCALLS=$n -DMUTANT_$m"
    check "MUTANT_$m, policy ${policies[$i]}, $n calls" "$defs" "-DSAFETY -DNOCLAIM -DCOLLAPSE" "-m1000000"
    if [ "$errors" = 0 ]; then
      echo "  FAIL: MUTANT_$m is not caught under policy ${policies[$i]}"
      failed=1
      continue
    fi
    if [ "$first" = 1 ]; then
      echo "    counterexample:"
      trail "$defs"
      first=0
    else
      replay "$defs"
    fi
    if [ "$broken" != "$want" ]; then
      echo "  FAIL: MUTANT_$m under policy ${policies[$i]} breaks ${broken:-nothing known}, want $want"
      failed=1
    fi
  done
done

if [ "$failed" != 0 ]; then
  echo "FATAL: the model check failed (above)" >&2
  exit 1
fi
echo "==> the model holds; every mutant is caught"
