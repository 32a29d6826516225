#!/usr/bin/env bash
# bbolt's own tests, run against rivet: bbolt v1.5.0's black-box
# test files (package bbolt_test) are taken from the Go module cache at test
# time — never copied into this repository — their imports rewritten to
# rivet, bbolt's internal test helpers replaced by rivet's stand-ins in
# shim/, the tests named in skip.txt removed (one reason each), and the rest
# run with `go test -short`. Exits non-zero if any test fails.
#
#   compat/bboltsuite/run.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")"
# This module is outside the repository's go.work (it keeps its own replace
# directive, as it is never installed): build it on its own.
export GOWORK=off

version=v1.5.0
dir=$(GOFLAGS= go mod download -json "go.etcd.io/bbolt@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "${dir}" ] || [ ! -d "${dir}" ]; then
  echo "bbolt ${version} is not in the module cache and could not be downloaded" >&2
  exit 1
fi

files=()
for f in "${dir}"/*_test.go; do
  if grep -q '^package bbolt_test$' "$f"; then
    files+=("$f")
  fi
done

# The suite is a package of this module (it needs the module's replace
# directive and shim/), in a directory of this run's own so two runs do not
# collide; it is removed on exit.
suite=$(mktemp -d "${PWD}/suite.XXXXXX")
trap 'rm -rf "${suite}"' EXIT
go run ./prune -skip skip.txt -out "${suite}" "${files[@]}"
skipped=$(grep -cv '^\s*\(#\|$\)' skip.txt || true)

echo "bbolt ${version}: ${#files[@]} black-box test files, ${skipped} tests skipped (skip.txt)"
go test -short -count=1 "$@" "./$(basename "${suite}")/"
