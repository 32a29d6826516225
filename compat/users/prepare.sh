# Sourced by run.sh and bench.sh: makes a writable copy of a user's module,
# taken from the Go module cache at a pinned version, and points it at the
# engine wanted. Needs ${repo} (rivet's root) set, GOWORK=off and
# GOFLAGS=-mod=mod exported.
#
#   users_prepare how module@version dest
#
# how is one of
#   import   its imports of go.etcd.io/bbolt rewritten to rivet (an import
#            without a name gets the name bbolt, the name it had);
#   replace  nothing rewritten: one replace directive points go.etcd.io/bbolt
#            at compat/bbolt, which moves its dependencies too;
#   bbolt    nothing moved: the module on go.etcd.io/bbolt v1.5.0, the
#            version rivet is measured against (bench.sh's baseline).
users_prepare() {
  local how=$1 mv=$2 dest=$3 dir files f old target goversion
  dir=$(go mod download -json "${mv}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "${dir}" ] || [ ! -d "${dir}" ]; then
    echo "${mv} is not in the module cache and could not be downloaded" >&2
    return 1
  fi
  goversion=$(go -C "${repo}" list -m -f '{{.GoVersion}}')
  cp -r "${dir}" "${dest}"
  chmod -R u+w "${dest}"
  (
    cd "${dest}"
    # A vendor directory would pin bbolt: the module graph decides instead.
    rm -rf vendor
    # A replacement by a directory that is not there (raft-boltdb ships
    # one on its author's machine) cannot resolve: the required version
    # stands. Directories inside the module are kept.
    awk '/=>[[:space:]]*[.\/]/ { sub(/^replace[[:space:]]+/, ""); print $1, $NF }' go.mod |
      while read -r old target; do
        [ -d "${target}" ] || go mod edit -dropreplace "${old}"
      done
    case "${how}" in
    import)
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
      ;;
    replace)
      go mod edit -replace "go.etcd.io/bbolt=${repo}/compat/bbolt"
      echo "${mv}: go.etcd.io/bbolt replaced by compat/bbolt, no file changed"
      ;;
    bbolt)
      go mod edit -require go.etcd.io/bbolt@v1.5.0
      echo "${mv}: on go.etcd.io/bbolt v1.5.0"
      ;;
    *)
      echo "users_prepare: unknown way ${how}" >&2
      return 1
      ;;
    esac
    # -toolchain=none: a toolchain line newer than this machine's Go
    # (etcd names go1.26.10) would make go download that toolchain.
    go mod edit -replace "github.com/rivetkv/rivet=${repo}" -go "${goversion}" -toolchain=none
    go mod tidy >/dev/null
  )
}

# users_dirname module@version: a directory name for the module's copy,
# e.g. bolthold-v0.0.0-20240314194003-30aac6950928.
users_dirname() {
  echo "$(basename "${1%@*}")-$(echo "${1#*@}" | tr -c 'a-zA-Z0-9.\n' '-')"
}

# users_links_rivet pkgs...: whether the packages (run from the module's
# directory) build with rivet in them. The dependency list is captured
# first: grep -q closing the pipe early would kill go list with SIGPIPE.
users_links_rivet() {
  local deps
  deps=$(go list -deps "$@")
  grep -qx github.com/rivetkv/rivet <<<"${deps}"
}
