#!/usr/bin/env bash
# The inner loop of development, in about a minute: gofmt, go vet of the
# library, and the tests of the library and its internal packages in
# -short mode, without the race detector and without fuzzing. Extra
# arguments go to go test (e.g. -count=1 to ignore cached results, or
# -run Pattern). scripts/test.sh runs everything before a merge.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "${unformatted}" ]; then
  echo "gofmt would change:"; echo "${unformatted}"; exit 1
fi

step "go vet (library)"
go vet ./...

step "go test -short (library and internal packages)"
go test -short "$@" ./...

echo
echo "quick checks passed in $(( $(date +%s) - start )) s"
