#!/usr/bin/env bash
# Users' own benchmarks, rivet against bbolt side by side: the benchmarks
# that etcd, raft-boltdb, bolthold, storm and containerd ship with their
# code, built twice from the same pinned module — once on go.etcd.io/bbolt
# v1.5.0, once moved to rivet the way run.sh moves it (prepare.sh) — and
# run in alternating order for a number of rounds in one process tree, on
# the same disk (TMPDIR). Prints, per benchmark, the median ns/op and B/op
# of each engine over the rounds and rivet ÷ bbolt, then the geometric mean
# of the time ratios per project.
#
#   compat/users/bench.sh [rounds [benchtime]]     defaults: 3 rounds, 1s
#
# Not part of CI (it measures; CI checks): docs/benchmarks.md holds a run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
export GOWORK=off GOFLAGS=-mod=mod
rounds=${1:-3}
benchtime=${2:-1s}

# "how module@version package benchmark-regexp": how is the way the
# project moves to rivet; the regexp picks the benchmarks that go through
# the database (etcd's mvcc package also benchmarks its in-memory index and
# watchers, which never touch it). etcd moves by its imports here, not by
# the replace directive run.sh uses for it: Go inlines a package's small
# functions only into packages that import it directly, and through
# compat/bbolt's aliases rivet's Bucket.Cursor is not inlined, so a cursor
# that etcd opens per key read cannot stay on its stack (README, "Moving
# from bbolt").
benches=(
  "import go.etcd.io/etcd/server/v3@v3.7.3 ./storage/backend ."
  "import go.etcd.io/etcd/server/v3@v3.7.3 ./storage/mvcc ^Benchmark(Store|WatchableStore(Put|TxnPut)|ConsistentIndex)"
  "import go.etcd.io/etcd/server/v3@v3.7.3 ./etcdserver/txn ^BenchmarkRange"
  "replace github.com/hashicorp/raft-boltdb/v2@v2.3.0 . ."
  "import github.com/timshannon/bolthold@v0.0.0-20240314194003-30aac6950928 . ."
  "import github.com/asdine/storm/v3@v3.2.1 . ."
  "import github.com/containerd/containerd@v1.7.24 ./metadata ^BenchmarkGarbageCollect"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/rivet-userbench.XXXXXX")
trap 'chmod -R u+w "${work}" 2>/dev/null; rm -rf "${work}"' EXIT
# shellcheck source=compat/users/prepare.sh
. compat/users/prepare.sh

results="${work}/results"
: >"${results}"
i=0
for entry in "${benches[@]}"; do
  read -r how mv pkg regexp <<<"${entry}"
  name=$(users_dirname "${mv}")
  for engine in bbolt rivet; do
    src="${work}/${engine}/${name}"
    if [ ! -d "${src}" ]; then
      mkdir -p "${work}/${engine}"
      way=${how}
      [ "${engine}" = bbolt ] && way=bbolt
      users_prepare "${way}" "${mv}" "${src}" >&2
    fi
    (
      cd "${src}"
      if [ "${engine}" = rivet ] && ! users_links_rivet "${pkg}"; then
        echo "${mv} ${pkg}: does not build with rivet" >&2
        exit 1
      fi
      go test -vet=off -c -o "${work}/bin-${i}-${engine}" "${pkg}"
    )
  done
  i=$((i + 1))
done

for round in $(seq 1 "${rounds}"); do
  i=0
  for entry in "${benches[@]}"; do
    read -r how mv pkg regexp <<<"${entry}"
    name=$(users_dirname "${mv}")
    # The engine that goes first alternates, so that neither always runs
    # on a disk the other has just dirtied.
    order="bbolt rivet"
    [ $(((round + i) % 2)) = 0 ] && order="rivet bbolt"
    for engine in ${order}; do
      echo "round ${round}/${rounds}: ${name} ${pkg} on ${engine}" >&2
      (
        cd "${work}/${engine}/${name}/${pkg}"
        "${work}/bin-${i}-${engine}" -test.run '^$' -test.bench "${regexp}" \
          -test.benchtime "${benchtime}" -test.benchmem 2>&1 |
          awk -v suite="${mv%@*}" -v pkg="${pkg#./}" -v engine="${engine}" '
            /^Benchmark/ && / ns\/op/ {
              ns = ""; bytes = ""
              for (f = 3; f <= NF; f++) {
                if ($f == "ns/op") ns = $(f - 1)
                if ($f == "B/op") bytes = $(f - 1)
              }
              sub(/-[0-9]+$/, "", $1)
              if (pkg != ".") $1 = pkg "." $1
              print suite, $1, engine, ns, bytes
            }'
      ) >>"${results}"
    done
    i=$((i + 1))
  done
done

awk -v rounds="${rounds}" '
  function median(list,   n, a, j, k, t) {
    n = split(list, a, " ")
    for (j = 2; j <= n; j++)
      for (k = j; k > 1 && a[k - 1] + 0 > a[k] + 0; k--) { t = a[k]; a[k] = a[k - 1]; a[k - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function human(ns) {
    if (ns >= 1e9) return sprintf("%.2f s", ns / 1e9)
    if (ns >= 1e6) return sprintf("%.2f ms", ns / 1e6)
    if (ns >= 1e3) return sprintf("%.2f µs", ns / 1e3)
    return sprintf("%.0f ns", ns)
  }
  {
    key = $1 " " $2
    if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
    ns[key, $3] = ns[key, $3] " " $4
    by[key, $3] = by[key, $3] " " $5
  }
  END {
    printf "| project | benchmark | bbolt ns/op | rivet ns/op | rivet ÷ bbolt | bbolt B/op | rivet B/op |\n"
    printf "|---|---|---|---|---|---|---|\n"
    for (k = 1; k <= nkeys; k++) {
      key = keys[k]
      if (ns[key, "bbolt"] == "" || ns[key, "rivet"] == "") continue
      split(key, part, " ")
      b = median(ns[key, "bbolt"]); r = median(ns[key, "rivet"])
      bb = median(by[key, "bbolt"]); rb = median(by[key, "rivet"])
      printf "| %s | %s | %s | %s | %.2f× | %d | %d |\n", part[1], part[2], human(b), human(r), r / b, bb, rb
      if (b > 0 && r > 0) { logsum[part[1]] += log(r / b); count[part[1]]++ }
      if (!(part[1] in order)) { order[part[1]] = ++nproj; projects[nproj] = part[1] }
    }
    printf "\nGeometric mean of rivet ÷ bbolt time per op (medians of %d rounds; below 1 is rivet faster):\n", rounds
    for (p = 1; p <= nproj; p++)
      printf "  %-40s %.2f× over %d benchmarks\n", projects[p], exp(logsum[projects[p]] / count[projects[p]]), count[projects[p]]
  }' "${results}"
