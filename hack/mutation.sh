#!/usr/bin/env bash
# Mutation testing with gremlins (pinned below): in each package, every mutant its own tests
# reach is applied alone and the package's tests run against it; efficacy = killed / (killed +
# lived). Mutants: gremlins' defaults (arithmetic, comparison boundaries and negations,
# ++/--, negated numbers) plus swapped &&/|| (invert-logical) and break/continue swapped
# (invert-loopctrl). Gremlins takes every reached mutant, in source order, so a run on the same
# code is reproducible.
#
# Only PKG's own files: gremlins would also mutate its subpackages (paths with a /) yet run
# only PKG's tests against them.
#
# Sampling (for CI's time budget): MUTATION_SAMPLE=P (percent, default 100) keeps about P % of
# each package's non-test files, chosen by a hash of MUTATION_SEED (default 1) and the file
# name, so the same seed picks the same files on every run; the rest are excluded. A package
# keeps at least one file (its lowest hash).
#
# Usage: hack/mutation.sh [FLOOR] PKG...   FLOOR: minimum efficacy in percent (default 0).
# Prints one line per package and a table; exits 1 when a package is under FLOOR.
set -euo pipefail
cd "$(dirname "$0")/.."
gremlins=${GREMLINS:-github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0}
floor=${1:-0}
shift || true
sample=${MUTATION_SAMPLE:-100}
seed=${MUTATION_SEED:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
table=$(printf '%-36s %6s %7s %6s %6s %8s %9s\n' package files killed lived timeout efficacy "")

# excluded PKG: --exclude-files arguments for the files of PKG left out of the sample. A
# package whose files all hash out keeps its lowest-hashed file: every package is sampled.
excluded() {
  local f h kept=() out=() all=0 min=-1 minf="" args=()
  for f in "$1"/*.go; do
    [[ $f == *_test.go ]] && continue
    all=$((all + 1))
    h=$(printf '%s:%s' "$seed" "${f#./}" | cksum | cut -d' ' -f1)
    if ((h % 100 < sample)); then kept+=("$f"); else out+=("$f"); fi
    if ((min < 0 || h % 100 < min)); then min=$((h % 100)) minf=$f; fi
  done
  if ((${#kept[@]} == 0 && all > 0)); then kept=("$minf"); fi
  for f in ${out[@]+"${out[@]}"}; do
    [[ $f == "${kept[0]}" ]] && continue
    args+=(--exclude-files "^$(basename "$f" .go)\\.go\$")
  done
  FILES="${#kept[@]}/$all"
  EXCLUDE=(${args[@]+"${args[@]}"})
}

for pkg in "$@"; do
  excluded "$pkg"
  echo "== mutation $pkg (files $FILES, sample $sample % seed $seed)"
  # -count=1: a cached test run would make gremlins time each mutant against a near-zero
  # coverage run, and every mutant would time out.
  if ! GOFLAGS="${GOFLAGS:-} -count=1" go run "$gremlins" unleash --workers 2 --timeout-coefficient 10 \
    --invert-logical --invert-loopctrl --exclude-files / ${EXCLUDE[@]+"${EXCLUDE[@]}"} "$pkg" >"$log" 2>&1; then
    tail -20 "$log"
    echo "gremlins failed on $pkg" >&2
    status=1
    continue
  fi
  grep -E '^ *(LIVED|TIMED OUT)' "$log" || true
  killed=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\1/p' "$log")
  lived=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\2/p' "$log")
  timedout=$(sed -n 's/^Timed out: \([0-9]*\),.*/\1/p' "$log")
  eff=$(sed -n 's/^Test efficacy: \([0-9.]*\)%.*/\1/p' "$log")
  verdict=ok
  if [[ -z $eff ]] && [[ ${killed:-0} == 0 && ${lived:-0} == 0 ]]; then
    eff=100 verdict="no mutant"
  elif awk -v e="${eff:-0}" -v f="$floor" 'BEGIN { exit !(e < f) }'; then
    verdict="< $floor%"
    status=1
  fi
  table+=$(printf '\n%-36s %6s %7s %6s %6s %7s%% %9s' "$pkg" "$FILES" "$killed" "$lived" "$timedout" "$eff" "$verdict")
done
echo
echo "$table"
exit "$status"
