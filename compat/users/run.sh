#!/usr/bin/env bash
# Users' own test suites, run against rivet: libraries built on bbolt whose
# tests exercise it the way applications do (typed records, indexes,
# queries, nested buckets, many small transactions). Each is taken from the
# Go module cache at a pinned version — never copied into this repository —
# into a temporary directory, its imports of go.etcd.io/bbolt rewritten to
# rivet (the one-line move the README promises), and its whole suite run
# with `go test`, unchanged. Exits non-zero if any test fails.
#
#   compat/users/run.sh [go test flags...]
#
# vet is off: it is the libraries' own code, and newer vet checks (e.g.
# non-constant format strings in their tests) are not rivet's to fix.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
export GOWORK=off GOFLAGS=-mod=mod

# module@version, for the libraries whose suites run.
suites=(
  "github.com/timshannon/bolthold@v0.0.0-20240314194003-30aac6950928"
  "github.com/asdine/storm/v3@v3.2.1"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/rivet-users.XXXXXX")
trap 'chmod -R u+w "${work}" 2>/dev/null; rm -rf "${work}"' EXIT

for mv in "${suites[@]}"; do
  mod=${mv%@*}
  dir=$(go mod download -json "${mv}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "${dir}" ] || [ ! -d "${dir}" ]; then
    echo "${mv} is not in the module cache and could not be downloaded" >&2
    exit 1
  fi
  src="${work}/$(basename "${mod}")-$(echo "${mv#*@}" | tr -c 'a-zA-Z0-9.\n' '-')"
  cp -r "${dir}" "${src}"
  chmod -R u+w "${src}"
  (
    cd "${src}"
    grep -rl 'go.etcd.io/bbolt' --include='*.go' . | xargs sed -i.bak 's|go\.etcd\.io/bbolt|github.com/rivetkv/rivet|g'
    find . -name '*.go.bak' -delete
    go mod edit -droprequire go.etcd.io/bbolt -require github.com/rivetkv/rivet@v0.0.0 \
      -replace "github.com/rivetkv/rivet=${repo}" -go "$(go -C "${repo}" list -m -f '{{.GoVersion}}')"
    go mod tidy >/dev/null
    echo "${mv}: $(grep -rl 'github.com/rivetkv/rivet' --include='*.go' . | wc -l) files moved to rivet"
    go test -vet=off -count=1 "$@" ./...
  )
done
