#!/usr/bin/env bash
# Users' own test suites, run against rivet: projects built on bbolt whose
# tests exercise it the way applications do (typed records, indexes,
# queries, nested buckets; containerd's metadata store and snapshot
# bookkeeping with their garbage collection and leases; buildkit's cache
# records and solver cache; hashicorp's raft log store, with its migration
# from the old boltdb/bolt; etcd's storage backend with its batched
# transactions, defragmentation and snapshots, the MVCC store above it and
# the server packages and embedded server that run on them). Each is taken from the Go module cache at a
# pinned version — never copied into this repository — into a temporary
# directory, moved to rivet in one of the two ways the README gives, and
# the named packages' tests run with `go test`, unchanged:
#
#   import   its imports of go.etcd.io/bbolt rewritten to rivet (an import
#            without a name gets the name bbolt, the name it had);
#   replace  nothing rewritten: one replace directive points go.etcd.io/bbolt
#            at compat/bbolt, which moves its dependencies too (buildkit
#            reaches bbolt also through containerd).
#
# Exits non-zero if any test fails.
#
#   compat/users/run.sh [go test flags...]
#
# vet is off: it is the projects' own code, and newer vet checks (e.g.
# non-constant format strings in their tests) are not rivet's to fix.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
export GOWORK=off GOFLAGS=-mod=mod

# "how module@version package...": the projects whose suites run, and which
# of their packages (the ones that use bbolt and have tests).
suites=(
  "import github.com/timshannon/bolthold@v0.0.0-20240314194003-30aac6950928 ./..."
  "import github.com/asdine/storm/v3@v3.2.1 ./..."
  "import github.com/containerd/containerd@v1.7.24 ./metadata/... ./snapshots/storage/..."
  "replace github.com/moby/buildkit@v0.16.0 ./cache ./cache/metadata/... ./cache/contenthash/... ./solver/bboltcachestorage/... ./snapshot/..."
  "replace github.com/hashicorp/raft-boltdb/v2@v2.3.0 ./..."
  "replace go.etcd.io/etcd/server/v3@v3.7.3 ./storage/... ./etcdserver ./etcdserver/api/etcdhttp ./etcdserver/api/v3compactor ./etcdserver/api/v3rpc ./etcdserver/apply ./etcdserver/cindex ./etcdserver/txn ./embed ./config"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/rivet-users.XXXXXX")
trap 'chmod -R u+w "${work}" 2>/dev/null; rm -rf "${work}"' EXIT
goversion=$(go -C "${repo}" list -m -f '{{.GoVersion}}')

for entry in "${suites[@]}"; do
  read -r how mv pkgs <<<"${entry}"
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
    # A vendor directory would pin bbolt: the module graph decides instead.
    rm -rf vendor
    # A replacement by a directory that is not there (raft-boltdb ships
    # one on its author's machine) cannot resolve: the required version
    # stands. Directories inside the module are kept.
    awk '/=>[[:space:]]*[.\/]/ { sub(/^replace[[:space:]]+/, ""); print $1, $NF }' go.mod |
      while read -r old target; do
        [ -d "${target}" ] || go mod edit -dropreplace "${old}"
      done
    if [ "${how}" = import ]; then
      files=$(grep -rl 'go.etcd.io/bbolt' --include='*.go' . || true)
      for f in ${files}; do
        sed -i.bak -E \
          -e 's#^([[:space:]]*)"go\.etcd\.io/bbolt"#\1bbolt "github.com/rivetkv/rivet"#' \
          -e 's#^import "go\.etcd\.io/bbolt"#import bbolt "github.com/rivetkv/rivet"#' \
          -e 's#go\.etcd\.io/bbolt#github.com/rivetkv/rivet#g' "${f}"
        rm -f "${f}.bak"
      done
      go mod edit -droprequire go.etcd.io/bbolt -require github.com/rivetkv/rivet@v0.0.0
      echo "${mv}: $(echo "${files}" | wc -w) files moved to rivet"
    else
      go mod edit -replace "go.etcd.io/bbolt=${repo}/compat/bbolt"
      echo "${mv}: go.etcd.io/bbolt replaced by compat/bbolt, no file changed"
    fi
    # -toolchain=none: a toolchain line newer than this machine's Go
    # (etcd names go1.26.10) would make go download that toolchain.
    go mod edit -replace "github.com/rivetkv/rivet=${repo}" -go "${goversion}" -toolchain=none
    go mod tidy >/dev/null
    # shellcheck disable=SC2086 # pkgs is a list of patterns
    deps=$(go list -deps ${pkgs})
    if ! grep -qx github.com/rivetkv/rivet <<<"${deps}"; then
      echo "${mv}: the packages do not build with rivet" >&2
      exit 1
    fi
    # shellcheck disable=SC2086 # pkgs is a list of patterns
    go test -vet=off -count=1 "$@" ${pkgs}
  )
done
