#!/usr/bin/env bash
# Prints the medians of run.sh's results.tsv (the runs of each
# configuration and store) as markdown tables.
#
#   bench/raftwal/table.sh results.tsv
set -euo pipefail

awk -F'\t' '
function median(key, col,    n, i, j, v, t) {
	n = runs[key]
	for (i = 1; i <= n; i++) v[i] = val[key, i, col]
	if (v[1] == "-") return "-"
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	if (n % 2) return v[(n + 1) / 2]
	return (v[n / 2] + v[n / 2 + 1]) / 2
}
function mib(b) { return sprintf("%.1f", b / 1048576) }
{
	key = $1 SUBSEP $2
	if (!(key in runs)) { order[++nkeys] = key; cfgOf[key] = $1; storeOf[key] = $2 }
	n = ++runs[key]
	for (c = 4; c <= NF; c++) val[key, n, c] = $c
}
END {
	print "| configuration | store | runs | appends/s | p50 ms | p99 ms | p99.9 ms | max ms |"
	print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
	for (k = 1; k <= nkeys; k++) {
		key = order[k]
		printf "| %s | %s | %d | %.0f | %.3f | %.3f | %.3f | %.3f |\n", cfgOf[key], storeOf[key], runs[key],
			median(key, 10), median(key, 6), median(key, 7), median(key, 8), median(key, 9)
	}
	print ""
	print "| configuration | store | truncations | p50 ms | p99 ms | p99.9 ms | max ms | largest MiB, 1st half / 2nd half of the run | largest allocated MiB | at end MiB (apparent / allocated) |"
	print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	for (k = 1; k <= nkeys; k++) {
		key = order[k]
		if (median(key, 11) == 0) continue
		printf "| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %s / %s | %s | %s / %s |\n", cfgOf[key], storeOf[key],
			median(key, 11), median(key, 12), median(key, 13), median(key, 14), median(key, 15),
			mib(median(key, 20)), mib(median(key, 21)), mib(median(key, 17)), mib(median(key, 18)), mib(median(key, 19))
	}
}' "$1"
