#!/usr/bin/env bash
# Mutation testing with gremlins (pinned below): in each package, every mutant its own tests
# reach (a flipped comparison, a negated condition, an arithmetic change, ...) is applied alone
# and the package's tests run against it; efficacy = killed / (killed + lived). Gremlins takes
# every reached mutant, in source order, so a run on the same code is reproducible.
#
# Usage: hack/mutation.sh [FLOOR] PKG...   FLOOR: minimum efficacy in percent (default 0).
# Prints one line per package and a table; exits 1 when a package is under FLOOR.
set -euo pipefail
cd "$(dirname "$0")/.."
gremlins=${GREMLINS:-github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0}
floor=${1:-0}
shift || true
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
table=$(printf '%-28s %7s %6s %6s %8s %9s\n' package killed lived timeout efficacy "")
for pkg in "$@"; do
  echo "== mutation $pkg"
  # -count=1: a cached test run would make gremlins time each mutant against a near-zero
  # coverage run, and every mutant would time out.
  if ! GOFLAGS="${GOFLAGS:-} -count=1" go run "$gremlins" unleash --workers 2 --timeout-coefficient 10 "$pkg" >"$log" 2>&1; then
    tail -20 "$log"
    echo "gremlins failed on $pkg" >&2
    status=1
    continue
  fi
  grep -E '^ *LIVED' "$log" || true
  killed=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\1/p' "$log")
  lived=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\2/p' "$log")
  timedout=$(sed -n 's/^Timed out: \([0-9]*\),.*/\1/p' "$log")
  eff=$(sed -n 's/^Test efficacy: \([0-9.]*\)%.*/\1/p' "$log")
  verdict=ok
  if awk -v e="${eff:-0}" -v f="$floor" 'BEGIN { exit !(e < f) }'; then
    verdict="< $floor%"
    status=1
  fi
  table+=$(printf '\n%-28s %7s %6s %6s %7s%% %9s' "$pkg" "$killed" "$lived" "$timedout" "$eff" "$verdict")
done
echo
echo "$table"
exit "$status"
