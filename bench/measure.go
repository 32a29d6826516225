package bench

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
)

// Median returns the median of xs (the mean of the two middle values when
// len(xs) is even), or NaN for no values. xs is not modified.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method: the smallest sample such that at least p% of the
// samples are <= it. Nearest rank always returns a value that was observed,
// which is what a tail latency should be; interpolation would report
// latencies no commit ever had. It returns NaN for no values or p out of
// range. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	n := len(xs)
	if n == 0 || !(p > 0 && p <= 100) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(n)))
	return s[max(rank, 1)-1]
}

// durationsToFloat converts latency samples to nanoseconds.
func durationsToFloat(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d)
	}
	return out
}

// ProcIO is a snapshot of the process's I/O accounting from /proc/self/io.
type ProcIO struct {
	// WriteBytes is bytes this process caused to be sent to the storage
	// layer (page-cache pages it dirtied), the closest a process can see to
	// "what the disk had to absorb". Zero on file systems without
	// accounting, such as tmpfs.
	WriteBytes int64
	// Wchar is bytes passed to write-family system calls, whether or not
	// they reached a disk: the write amplification the seed report measured.
	Wchar int64
	// Syscw is the number of write-family system calls: an engine-neutral
	// count of write calls, for engines that keep no counter of their own.
	// It includes the few writes of the rest of the process (the Go runtime
	// writes nothing in steady state; progress output goes to a terminal).
	Syscw int64
}

// ReadProcIO reads /proc/self/io. ok is false where the file does not
// exist (non-Linux systems, kernels without task I/O accounting), in which
// case the figures derived from it are left out of the report.
func ReadProcIO() (io ProcIO, ok bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ProcIO{}, false
	}
	var seenW, seenWB, seenSC bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, val, found := bytes.Cut(sc.Bytes(), []byte(":"))
		if !found {
			continue
		}
		v, err := strconv.ParseInt(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil {
			continue
		}
		switch string(name) {
		case "wchar":
			io.Wchar, seenW = v, true
		case "write_bytes":
			io.WriteBytes, seenWB = v, true
		case "syscw":
			io.Syscw, seenSC = v, true
		}
	}
	return io, seenW && seenWB && seenSC
}

// Sub returns the I/O between base and p.
func (p ProcIO) Sub(base ProcIO) ProcIO {
	return ProcIO{WriteBytes: p.WriteBytes - base.WriteBytes, Wchar: p.Wchar - base.Wchar, Syscw: p.Syscw - base.Syscw}
}

// PeakRSS returns the process's peak resident set size in bytes, where the
// OS reports it (getrusage). It is a property of the whole process, so the
// report carries it once rather than per workload: per-workload memory needs
// a process per run, which the memory workload will do.
func PeakRSS() (n int64, ok bool) { return peakRSS() }
