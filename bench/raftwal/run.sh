#!/usr/bin/env bash
# Runs hashicorp/raft-wal's append benchmark (its bench/ program) against
# raft-wal, raft-boltdb v2 and rivet's raftstore, side by side, and prints
# the medians as a markdown table.
#
#   bench/raftwal/run.sh RIVET_CHECKOUT [OUT_DIR]
#
# RIVET_CHECKOUT is the rivet checkout whose raftstore is measured (this
# script can be re-run on any later commit). The harness is cloned and built
# outside it, under OUT_DIR (default $TMPDIR/rivet-raftwal); the only glue is
# this directory's store_rivet.go (copied into the harness's bench/) and
# rivet.patch (adds "-v rivet" and prints the latency percentiles with
# microsecond resolution instead of whole milliseconds).
#
# Environment:
#   RAFTWAL_SRC     where to clone raft-wal from (default the GitHub repo)
#   RAFTWAL_COMMIT  the commit to build (default below)
#   STORES          the stores, in the order each round runs them
#   REPS            rounds per configuration (default 3; medians are taken)
#   DUR             duration of a fixed-rate run (default 15s)
#   FULL_DUR        duration of a full-speed run, -rate 0 (default 10s)
#   TRUNC_DUR       duration of the truncation run (default 30s)
#   CONFIGS         the configurations to run (default all: see below)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rivet=${1:?usage: run.sh RIVET_CHECKOUT [OUT_DIR]}
rivet=$(cd "$rivet" && pwd)
out=${2:-${TMPDIR:-/tmp}/rivet-raftwal}
src=${RAFTWAL_SRC:-https://github.com/hashicorp/raft-wal}
commit=${RAFTWAL_COMMIT:-4c1ca012476791f35ec1ea6807080ec5426c9f91}
stores=${STORES:-wal bolt rivet}
reps=${REPS:-3}
dur=${DUR:-15s}
full_dur=${FULL_DUR:-10s}
trunc_dur=${TRUNC_DUR:-30s}

# name|harness flags. Fixed rates are appends (StoreLogs calls) per second,
# chosen below the slowest store's full speed on a 2-vCPU VM so that the
# latencies are the stores' and not a queue's; the "full" rows run at
# -rate 0 (back to back) for each store's throughput.
all_configs=(
	"1k-b1-r2000|-s 1024 -n 1 -rate 2000 -t $dur"
	"1k-b1-full|-s 1024 -n 1 -rate 0 -t $full_dur"
	"1k-b10-r1000|-s 1024 -n 10 -rate 1000 -t $dur"
	"1k-b10-full|-s 1024 -n 10 -rate 0 -t $full_dur"
	"100k-b1-r500|-s 102400 -n 1 -rate 500 -t $dur"
	"100k-b1-full|-s 102400 -n 1 -rate 0 -t $full_dur"
	"1k-b10-r1000-tp1s|-s 1024 -n 10 -rate 1000 -tp 1s -trail 10000 -t $trunc_dur"
)
configs=${CONFIGS:-$(printf '%s\n' "${all_configs[@]}" | cut -d'|' -f1 | tr '\n' ' ')}

export GOWORK=off GOFLAGS=-mod=mod
mkdir -p "$out"
out=$(cd "$out" && pwd)
harness=$out/raft-wal

# Build the harness with the glue.
if [ ! -d "$harness/.git" ]; then
	git clone -q "$src" "$harness"
fi
git -C "$harness" checkout -q -f "$commit"
git -C "$harness" clean -q -fdx
cp "$here/store_rivet.go" "$harness/bench/"
git -C "$harness" apply "$here/rivet.patch"
(
	cd "$harness"
	go mod edit \
		-require=github.com/rivetkv/rivet@v0.0.0 \
		-require=github.com/rivetkv/rivet/raftstore@v0.0.0 \
		-replace=github.com/rivetkv/rivet="$rivet" \
		-replace=github.com/rivetkv/rivet/raftstore="$rivet/raftstore"
	go mod tidy
	go build -tags raftwalbench -o "$out/raftwal-bench" ./bench
)
rivet_commit=$(git -C "$rivet" rev-parse --short HEAD 2>/dev/null || echo unknown)
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "rivet: $rivet_commit ($rivet)"
	echo "raft-wal: $commit"
	echo "go: $(go version)"
	echo "modules: $(cd "$harness" && go list -m go.etcd.io/bbolt github.com/hashicorp/raft-boltdb/v2 github.com/hashicorp/raft | tr '\n' ' ')"
	echo "cpus: $(nproc)"
} | tee "$out/env.txt"

# sizes DIR: apparent and allocated bytes of the stores' files in DIR.
sizes() {
	find "$1" -maxdepth 1 -type f \( -name '*.wal' -o -name '*.db' -o -name '*.db-journal-*' \) -printf '%s %b\n' |
		awk '{a += $1; b += $2 * 512} END {printf "%.0f %.0f\n", a, b}'
}

# Results: one line per run in results.tsv:
# config store rep count mean p50 p99 p99.9 max throughput
#   tcount tp50 tp99 tp99.9 tmax size_max alloc_max size_end alloc_end
#   size_max_first_half size_max_second_half
results=$out/results.tsv
: >"$results"
for name in $configs; do
	flags=
	for c in "${all_configs[@]}"; do
		if [ "${c%%|*}" = "$name" ]; then flags=${c#*|}; fi
	done
	[ -n "$flags" ] || { echo "unknown configuration $name" >&2; exit 2; }
	echo "== $name: $flags; load: $(uptime | sed 's/.*load average: //')" | tee -a "$out/load.txt"
	for rep in $(seq 1 "$reps"); do
		for store in $stores; do
			run=$out/runs/$name/$store-$rep
			rm -rf "$run"
			mkdir -p "$run/data"
			# Sample the files' sizes every 200 ms while the run lasts.
			(
				while :; do
					sizes "$run/data"
					sleep 0.2
				done
			) >"$run/sizes.txt" 2>/dev/null &
			sampler=$!
			# shellcheck disable=SC2086
			(cd "$run" && "$out/raftwal-bench" -v "$store" -dir "$run/data" $flags >stdout.txt 2>&1)
			end=$(sizes "$run/data")
			kill "$sampler" 2>/dev/null || true
			wait "$sampler" 2>/dev/null || true
			rm -rf "$run/data"
			awk -v cfg="$name" -v store="$store" -v rep="$rep" -v end="$end" -v sizes="$run/sizes.txt" '
				/^==> Good Append Latencies/ { getline; getline; split($0, a, " ") }
				/^==> Truncate Latency/ { getline; getline; split($0, t, " ") }
				/Throughput:/ { match($0, /Throughput: [0-9.]+/); thr = substr($0, RSTART + 12, RLENGTH - 12) }
				END {
					while ((getline line < sizes) > 0) {
						split(line, s, " ")
						n++
						app[n] = s[1] + 0
						if (s[1] > smax) smax = s[1]
						if (s[2] > amax) amax = s[2]
					}
					# The largest apparent size in the first and in the
					# second half of the run: a bounded file stops growing.
					for (i = 1; i <= n; i++) {
						if (i <= n / 2 && app[i] > h1) h1 = app[i]
						if (i > n / 2 && app[i] > h2) h2 = app[i]
					}
					split(end, e, " ")
					if (e[1] > smax) smax = e[1]
					if (e[2] > amax) amax = e[2]
					if (!(1 in t)) { t[1] = 0; t[2] = "-"; t[3] = "-"; t[4] = "-"; t[5] = "-"; t[6] = "-" }
					# %.0f: some awks print integers past 2^31 as 2147483647.
					printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n",
						cfg, store, rep, a[1], a[2], a[3], a[4], a[5], a[6], thr, t[1], t[3], t[4], t[5], t[6], smax, amax, e[1], e[2], h1, h2
				}' OFS='\t' "$run/stdout.txt" | tee -a "$results"
		done
	done
done
echo "== end; load: $(uptime | sed 's/.*load average: //')" | tee -a "$out/load.txt"

# Medians of the rounds, per configuration and store.
"$here/table.sh" "$results" | tee "$out/table.md"
