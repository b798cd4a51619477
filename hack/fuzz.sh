#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time each: go test -fuzz takes one target
# of one package per run.
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "== fuzz $pkg $name ($fuzztime)"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    status=1
  fi
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's/func //' | sort)
exit $status
