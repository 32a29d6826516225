// Package bench measures rivet side by side with bbolt on the same machine,
// in the same process, with the same workload code.
//
// The pieces are kept apart so that a new comparison costs one small file:
//
//   - An Engine opens a DB; a DB exposes the handful of operations the
//     workloads need (a durable multi-key update, deletes, gets, range scans,
//     the engine's own I/O counters). bbolt and rivet share one generic
//     adapter (kv.go), so both are driven by literally the same code and a
//     difference in the figures is the engines', not the adapters'.
//   - A Workload is a named function that drives one engine in a fresh
//     directory and records figures: scalars (one value per run) and
//     distributions (latency samples, reported as median and p99).
//   - Run executes the selected workloads for every selected engine and run,
//     interleaving engines within a run so slow drift of the machine (page
//     cache, thermal, other tenants) hits all engines alike, and returns a
//     Report whose rows carry the ratio to the bbolt baseline.
//
// Figures taken from outside the engines — /proc/self/io byte counts and
// the process's peak RSS — are reported where the OS provides them and left
// out elsewhere, never faked.
package bench
