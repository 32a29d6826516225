// Command allocmodel models where a copy-on-write B+tree's commits put their
// pages under uniformly random updates, and prints the write runs per commit
// and the file size each allocation policy leads to (docs/design.md §4.2,
// §4.3). It is a model, not rivet: pages are cells of an array, the tree is
// leaves under one level of branches under a root, a commit rewrites the
// leaves of its random keys, their branches and the root, and the pages it
// replaces become reusable at the next commit (Full mode with no reader).
//
// Usage:
//
//	go run ./cmd/allocmodel                 # every policy, the default shape
//	go run ./cmd/allocmodel -policy slack -slack 0.5
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
)

// extent is a run of free pages [start, start+n).
type extent struct{ start, n int }

// file is the model's page array.
type file struct {
	free  []bool
	nfree int
}

func (f *file) size() int { return len(f.free) }

// grow appends n used pages and returns the first.
func (f *file) grow(n int) int {
	first := len(f.free)
	f.free = append(f.free, make([]bool, n)...)
	return first
}

func (f *file) take(p int) {
	f.free[p] = false
	f.nfree--
}

func (f *file) release(p int) {
	f.free[p] = true
	f.nfree++
}

// extents lists the free runs in address order.
func (f *file) extents() []extent {
	var out []extent
	for i := 0; i < len(f.free); {
		if !f.free[i] {
			i++
			continue
		}
		j := i
		for j < len(f.free) && f.free[j] {
			j++
		}
		out = append(out, extent{i, j - i})
		i = j
	}
	return out
}

// A policy returns n pages for one commit.
type policy func(f *file, n int) []int

// firstFit takes the lowest free pages (rivet with no slack: every node is
// one page here, so the lowest fitting run is the lowest free page).
func firstFit(f *file, n int) []int {
	var out []int
	for p := 0; p < f.size() && len(out) < n; p++ {
		if f.free[p] {
			f.take(p)
			out = append(out, p)
		}
	}
	for len(out) < n {
		out = append(out, f.grow(1))
	}
	return out
}

// largestFirst fills the longest free runs first (the lowest on a tie).
// After maxExtents runs it grows the file instead while less than slack of
// it is free (rivet's LocalitySlack rule); slack 0 never grows early.
func largestFirst(slack float64, maxExtents int) policy {
	return func(f *file, n int) []int {
		ex := f.extents()
		slices.SortStableFunc(ex, func(a, b extent) int { return b.n - a.n })
		var out []int
		for i, e := range ex {
			if len(out) == n {
				break
			}
			if i >= maxExtents && float64(f.nfree) < slack*float64(f.size()) {
				break
			}
			for p := e.start; p < e.start+e.n && len(out) < n; p++ {
				f.take(p)
				out = append(out, p)
			}
		}
		if len(out) < n {
			first := f.grow(n - len(out))
			for p := first; p < f.size(); p++ {
				out = append(out, p)
			}
		}
		return out
	}
}

// lowestOfAtLeast fills the lowest free runs of at least k pages and grows
// the file when there is none, until the file reaches limit pages; then it
// is first fit.
func lowestOfAtLeast(k, limit int) policy {
	return func(f *file, n int) []int {
		var out []int
		for _, e := range f.extents() {
			if len(out) == n {
				break
			}
			if e.n < k {
				continue
			}
			for p := e.start; p < e.start+e.n && len(out) < n; p++ {
				f.take(p)
				out = append(out, p)
			}
		}
		if len(out) < n && f.size() >= limit {
			out = append(out, firstFit(f, n-len(out))...)
		}
		if len(out) < n {
			first := f.grow(n - len(out))
			for p := first; p < f.size(); p++ {
				out = append(out, p)
			}
		}
		return out
	}
}

// runs counts the contiguous runs among the pages.
func runs(pages []int) int {
	s := slices.Sorted(slices.Values(pages))
	r := 0
	for i, p := range s {
		if i == 0 || p != s[i-1]+1 {
			r++
		}
	}
	return r
}

// shape is the modelled tree and workload.
type shape struct {
	leaves, fanout, keys, commits int
	seed                          uint64
}

// simulate runs the workload under pol and returns the mean runs and pages
// per commit over the second half of the commits, and the file's size as a
// multiple of the live pages at the end.
func simulate(sh shape, pol policy) (runsPerCommit, pagesPerCommit, sizeRatio float64) {
	branches := (sh.leaves + sh.fanout - 1) / sh.fanout
	objects := sh.leaves + branches + 1 // the root is last
	f := &file{}
	where := make([]int, objects)
	for o := range where {
		where[o] = f.grow(1) // loaded in order: packed
	}
	rng := rand.New(rand.NewPCG(sh.seed, 1))
	var pending []int
	var totRuns, totPages, measured int
	for c := range sh.commits {
		for _, p := range pending {
			f.release(p)
		}
		pending = pending[:0]
		dirty := map[int]bool{objects - 1: true}
		for range sh.keys {
			leaf := rng.IntN(sh.leaves)
			dirty[leaf] = true
			dirty[sh.leaves+leaf/sh.fanout] = true
		}
		objs := slices.Sorted(func(yield func(int) bool) {
			for o := range dirty {
				if !yield(o) {
					return
				}
			}
		})
		pages := pol(f, len(objs))
		for i, o := range objs {
			pending = append(pending, where[o])
			where[o] = pages[i]
		}
		if c >= sh.commits/2 {
			totRuns += runs(pages)
			totPages += len(pages)
			measured++
		}
	}
	return float64(totRuns) / float64(measured), float64(totPages) / float64(measured), float64(f.size()) / float64(objects)
}

func main() {
	sh := shape{}
	flag.IntVar(&sh.leaves, "leaves", 34000, "leaves (the bench's update-locality file after load)")
	flag.IntVar(&sh.fanout, "fanout", 150, "leaves per branch")
	flag.IntVar(&sh.keys, "keys", 100, "random keys updated per commit")
	flag.IntVar(&sh.commits, "commits", 2000, "commits (the second half is measured)")
	flag.Uint64Var(&sh.seed, "seed", 1, "random seed")
	only := flag.String("policy", "", "run one policy: firstfit, largest, lowest16, slack (default: all)")
	slack := flag.Float64("slack", 0.5, "the slack of -policy slack")
	flag.Parse()

	type row struct {
		name, key string
		pol       policy
	}
	live := sh.leaves + (sh.leaves+sh.fanout-1)/sh.fanout + 1
	rows := []row{
		{"first fit (slack 0)", "firstfit", firstFit},
		{"largest first, no growth", "largest", largestFirst(0, 8)},
		{"lowest run of >= 16 pages, else grow, file <= 2x live", "lowest16", lowestOfAtLeast(16, 2*live)},
	}
	slacks := []float64{0.2, 1.0 / 3, 0.5, 0.65}
	if *only == "slack" {
		slacks = []float64{*slack}
	}
	for _, s := range slacks {
		rows = append(rows, row{fmt.Sprintf("slack %.2f (8 extents, then grow while < %.0f%% free)", s, 100*s), "slack", largestFirst(s, 8)})
	}
	fmt.Printf("%d leaves, %d per branch, %d random keys a commit, %d commits (second half measured), seed %d\n",
		sh.leaves, sh.fanout, sh.keys, sh.commits, sh.seed)
	fmt.Printf("%-60s %12s %12s %12s\n", "policy", "runs/commit", "pages/commit", "file/live")
	ran := false
	for _, r := range rows {
		if *only != "" && r.key != *only {
			continue
		}
		ran = true
		rc, pc, size := simulate(sh, r.pol)
		fmt.Printf("%-60s %12.1f %12.1f %12.2f\n", r.name, rc, pc, size)
	}
	if !ran {
		fmt.Fprintf(os.Stderr, "allocmodel: unknown policy %q\n", *only)
		os.Exit(2)
	}
}
