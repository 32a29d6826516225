#!/usr/bin/env python3
"""Tabulates the kvbench result files run.sh writes: medians over rounds.

Layout read: RESULTS/r<round>/<label>/<engine>__<workload>__...__<DUR>.json,
one repetition each. Prints Markdown: throughput with the ratio to bbolt,
its min-max over the runs, p99 latency, and the data directory's size after
fillrandom.
"""

import argparse
import glob
import json
import os
import statistics
import sys

TITLES = {
    "bbolt": "bbolt",
    "rivet-full": "rivet (bbolt adapter, Full)",
    "rivet-none": "rivet-none",
    "rivet-periodic": "rivet-periodic",
    "rivet-none-batch": "rivet-none, Batch",
    "pebble": "pebble",
}


def load(results):
    """Returns {(label, workload, durability): [result, ...]} over rounds."""
    cells = {}
    for path in sorted(glob.glob(os.path.join(results, "r*", "*", "*.json"))):
        label = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            r = json.load(f)
        key = (label, r["workload"]["name"], r["workload"]["durability"])
        cells.setdefault(key, []).append(r)
    return cells


def median(values):
    return statistics.median(values) if values else None


def fmt_ops(v):
    return "-" if v is None else f"{v:,.0f}"


def fmt_ns(v):
    if v is None:
        return "-"
    if v >= 1_000_000:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1e3:.0f} µs"


def min_max(values):
    if not values:
        return "-"
    return f"{fmt_ops(min(values))}–{fmt_ops(max(values))}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--labels", required=True)
    p.add_argument("--rivet", default="?")
    p.add_argument("--harness", default="?")
    p.add_argument("--elapsed", default="?")
    p.add_argument("--uptime")
    p.add_argument("--params", default="")
    a = p.parse_args()

    labels = a.labels.split()
    cells = load(a.results)
    if not cells:
        sys.exit(f"no result files under {a.results}")

    # Rows in the order the cells ran: DEFAULT workloads, then FULL.
    rows = []
    for (_, wl, dur) in cells:
        if (wl, dur) not in rows:
            rows.append((wl, dur))
    rows.sort(key=lambda r: (r[1] != "DEFAULT", r[0]))

    errors = []

    def ok(key):
        rs = cells.get(key, [])
        for r in rs:
            if r.get("error"):
                errors.append(f"{key[0]} {key[1]} {key[2]}: {r['error']}")
        return [r for r in rs if not r.get("error")]

    def stat(key, get):
        return median([get(r) for r in ok(key)])

    def with_ratio(v, base):
        if v is None:
            return "-"
        if base:
            return f"{fmt_ops(v)} ({v / base:.2f}×)"
        return fmt_ops(v)

    header = ["workload (durability)"] + [TITLES.get(l, l) for l in labels]
    tput, spread, p99, size = [], [], [], []

    # Load phase of the DEFAULT fillrandom cells: sequential keys, 1,000 per commit.
    load_of = {l: stat((l, "fillrandom", "DEFAULT"), lambda r: r["load"]["ops_per_sec"]) for l in labels}
    if any(v is not None for v in load_of.values()):
        tput.append(["load, 1,000 keys a commit (DEFAULT)"] + [with_ratio(load_of[l], load_of.get("bbolt")) for l in labels])

    for wl, dur in rows:
        ops = {l: stat((l, wl, dur), lambda r: r["throughput"]["sustained_ops"]) for l in labels}
        tput.append([f"{wl} ({dur})"] + [with_ratio(ops[l], ops.get("bbolt")) for l in labels])
        spread.append([f"{wl} ({dur})"] + [min_max([r["throughput"]["sustained_ops"] for r in ok((l, wl, dur))]) for l in labels])
        p99.append([f"{wl} ({dur})"] + [fmt_ns(stat((l, wl, dur), lambda r: r["latency_ns"]["p99"])) for l in labels])

    for wl, dur in rows:
        if wl != "fillrandom":
            continue
        sizes = {l: stat((l, wl, dur), lambda r: r["amplification"]["on_disk_bytes"]) for l in labels}
        size.append([f"{wl} ({dur})"] + ["-" if sizes[l] is None or sizes[l] < 0 else f"{sizes[l] / 2**20:,.0f}" for l in labels])

    runs = {l: max((len(cells.get((l, wl, dur), [])) for wl, dur in rows), default=0) for l in labels}
    print()
    print(f"rivet {a.rivet}, kvbench {a.harness}, {a.params}")
    print(f"medians of {', '.join(f'{l} {n}' for l, n in runs.items())} runs; measured in {a.elapsed} s")
    if a.uptime and os.path.exists(a.uptime):
        with open(a.uptime) as f:
            for line in f:
                print("  " + line.strip())
    print()
    print("Throughput, operations per second (ratio to bbolt):")
    print()
    print(table(header, tput))
    print()
    print("Throughput over the runs, min–max:")
    print()
    print(table(header, spread))
    print()
    print("p99 latency (median over runs of each run's p99):")
    print()
    print(table(header, p99))
    if size:
        print()
        print("Data directory after the cell, MiB:")
        print()
        print(table(header, size))
    if errors:
        print()
        print("Errors:")
        for e in errors:
            print("  " + e)
        sys.exit(1)


if __name__ == "__main__":
    main()
