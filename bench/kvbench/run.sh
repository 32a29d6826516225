#!/usr/bin/env bash
# Runs the kvbench harness (github.com/tamnd/kvbench) on bbolt, rivet and
# pebble side by side and prints one table. See README.md beside this file.
#
# usage: bench/kvbench/run.sh [RIVET_CHECKOUT]
#
# RIVET_CHECKOUT defaults to the repository this script lives in.
# Environment (defaults in brackets):
#   KVBENCH_SRC   git URL or local path of the harness [https://github.com/tamnd/kvbench]
#   KVBENCH_REV   harness commit to check out [the pinned one below]
#   WORK          working directory for the harness, binaries, data and results
#                 [a new directory under ${TMPDIR:-/tmp}; removed at the end
#                 unless KEEP=1]
#   KEEP          1 keeps WORK
#   ROUNDS        runs per cell; the table shows medians [3]
#   CARD          keys loaded before each cell [100000]
#   VAL           value size in bytes [1024]
#   CONC          client goroutines [8]
#   OPS           measured operations per workload, as workload=ops pairs
#                 ["fillrandom=100000 ycsb-a=100000 ycsb-b=400000 ycsb-c=1000000"]
#   FULL_OPS      measured operations of fillrandom under durability FULL (a
#                 flush per commit); 0 skips those cells [10000]
#   ENGINES       labels to run, a subset of: bbolt rivet-full rivet-none
#                 rivet-periodic rivet-none-batch pebble [all but
#                 rivet-none-batch]
#   SEED          base seed [1]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rivet_dir=$(cd "${1:-$here/../..}" && pwd)
kvbench_src=${KVBENCH_SRC:-https://github.com/tamnd/kvbench}
kvbench_rev=${KVBENCH_REV:-6dbf96f86e6a9878f0c9ff8855ba28b91ed8f86a}
rounds=${ROUNDS:-3}
card=${CARD:-100000}
val=${VAL:-1024}
conc=${CONC:-8}
ops=${OPS:-"fillrandom=100000 ycsb-a=100000 ycsb-b=400000 ycsb-c=1000000"}
full_ops=${FULL_OPS:-10000}
engines=${ENGINES:-"bbolt rivet-full rivet-none rivet-periodic pebble"}
seed=${SEED:-1}

if [ ! -f "$rivet_dir/compat/bbolt/go.mod" ]; then
	echo "$rivet_dir is not a rivet checkout (no compat/bbolt/go.mod)" >&2
	exit 2
fi
if ! command -v python3 >/dev/null; then
	echo "python3 is needed to tabulate the results" >&2
	exit 2
fi

if [ -n "${WORK:-}" ]; then
	mkdir -p "$WORK"
	work=$(cd "$WORK" && pwd)
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/kvbench-rivet.XXXXXX")
fi
if [ "${KEEP:-0}" != 1 ]; then
	trap 'rm -rf "$work"' EXIT
fi
echo "work directory: $work"

# --- the harness, at its pinned commit -------------------------------------
src=$work/kvbench
rm -rf "$src"
if [ -d "$kvbench_src" ] && ! git -C "$kvbench_src" rev-parse --git-dir >/dev/null 2>&1; then
	cp -R "$kvbench_src" "$src" # a plain directory: used as it is
	harness_rev="(plain directory $kvbench_src)"
else
	git clone --quiet "$kvbench_src" "$src"
	git -C "$src" -c advice.detachedHead=false checkout --quiet "$kvbench_rev"
	harness_rev=$(git -C "$src" rev-parse HEAD)
fi

# --- the glue ---------------------------------------------------------------
# The harness's tamnd/kv adapter needs a module version the Go module proxy
# does not serve, and no engine run here needs it: leave it out of the build
# (its import here, its requirement below).
sed -i.orig '\#"github.com/tamnd/kvbench/adapters/kv"#d' "$src/cmd/kvbench/main.go"
rm -f "$src/cmd/kvbench/main.go.orig"

# rivet-none and rivet-periodic: our adapter, behind the kvbench build tag.
mkdir -p "$src/adapters/rivet"
cp "$here/rivet.go" "$src/adapters/rivet/rivet.go"
cat >"$src/cmd/kvbench/adapters_rivet.go" <<'EOF'
//go:build kvbench

package main

import _ "github.com/tamnd/kvbench/adapters/rivet"
EOF

export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -mod=mod"
rivet_rev=$(git -C "$rivet_dir" describe --always --dirty 2>/dev/null || echo unknown)
ldflags="-X github.com/tamnd/kvbench/adapters/rivet.version=$rivet_rev"

# Binary "plain": real bbolt, pebble, and rivet through our adapter.
(
	cd "$src"
	go mod edit -droprequire=github.com/tamnd/kv \
		-require=github.com/rivetkv/rivet@v0.0.0 -replace=github.com/rivetkv/rivet="$rivet_dir"
	# Binary "rivetbolt": the same source with go.etcd.io/bbolt replaced by
	# rivet's compat/bbolt, so the harness's bbolt adapter runs rivet with
	# its default options (Durability Full).
	cp go.mod go.rivetbolt.mod
	cp go.sum go.rivetbolt.sum
	go mod edit -modfile=go.rivetbolt.mod -replace=go.etcd.io/bbolt="$rivet_dir/compat/bbolt"
	echo "building the harness (plain: go.etcd.io/bbolt as pinned)"
	go build -tags kvbench -ldflags "$ldflags" -o "$work/kvbench-plain" ./cmd/kvbench
	echo "building the harness (rivetbolt: go.etcd.io/bbolt => $rivet_dir/compat/bbolt)"
	go build -tags kvbench -ldflags "$ldflags" -modfile=go.rivetbolt.mod -o "$work/kvbench-rivetbolt" ./cmd/kvbench
	# What each binary links (a replaced module shows its "=>" line).
	for b in plain rivetbolt; do
		go version -m "$work/kvbench-$b" | awk -v b="$b" '
			$1 == "dep" { show = $2 == "go.etcd.io/bbolt" || $2 == "github.com/cockroachdb/pebble" || $2 == "github.com/rivetkv/rivet" }
			($1 == "dep" || $1 == "=>") && show { print "  " b ": " $0 }'
	done
)

# Each label names a binary and the engine name the harness knows it by.
binary_of() {
	case $1 in
	rivet-full) echo "$work/kvbench-rivetbolt" ;;
	*) echo "$work/kvbench-plain" ;;
	esac
}
engine_of() {
	case $1 in
	rivet-full) echo bbolt ;;
	*) echo "$1" ;;
	esac
}
# Engines whose FULL cell differs from what else is measured: rivet-none and
# rivet-periodic open with Durability Full under FULL, which is rivet-full.
has_full_cell() {
	case $1 in
	bbolt | rivet-full | pebble) return 0 ;;
	*) return 1 ;;
	esac
}

# one LABEL ROUND DURABILITY WORKLOAD OPS: one cell, one repetition.
one() {
	local label=$1 round=$2 dur=$3 wl=$4 n=$5
	local out=$work/results/r$round/$label
	mkdir -p "$out"
	# The harness derives repetition i's seed as seed + i*1000003; rounds do the same.
	"$(binary_of "$label")" run --engines "$(engine_of "$label")" --workloads "$wl" \
		--regimes cache-resident --durability "$dur" --values "$val" --conc "$conc" \
		--cardinality "$card" --ops "$n" --reps 1 --seed $((seed + (round - 1) * 1000003)) \
		--out "$out" | grep '^\[' | sed "s/^/  r$round $label: /"
}

echo "load: $(uptime)" | tee "$work/uptime.txt"
start=$(date +%s)
# Rounds alternate the engines, and the order of the engines turns each round
# so no engine always runs first (cold page cache, other load on the machine).
read -r -a labels <<<"$engines"
for ((round = 1; round <= rounds; round++)); do
	n=${#labels[@]}
	for ((j = 0; j < n; j++)); do
		label=${labels[$(((j + round - 1) % n))]}
		for pair in $ops; do
			one "$label" "$round" DEFAULT "${pair%%=*}" "${pair#*=}"
		done
		if [ "$full_ops" -gt 0 ] && has_full_cell "$label"; then
			one "$label" "$round" FULL fillrandom "$full_ops"
		fi
	done
	echo "after round $round: $(uptime)" | tee -a "$work/uptime.txt"
done
elapsed=$(($(date +%s) - start))

python3 "$here/table.py" "$work/results" \
	--rivet "$rivet_rev" --harness "$harness_rev" --elapsed "$elapsed" \
	--uptime "$work/uptime.txt" --labels "$engines" \
	--params "cardinality $card, values $val B, $conc clients, rounds $rounds, ops: $ops; FULL fillrandom $full_ops"
