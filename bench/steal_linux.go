package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"
)

// stolenCPU returns the CPU time the hypervisor has taken from this
// machine's virtual CPUs since boot, summed over them: the steal column of
// /proc/stat's first line. While it grows, every thread on the machine is
// stopped, whatever it runs; a latency that coincides with it says nothing
// about the engine. It returns false where the kernel does not report it.
func stolenCPU() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return 0, false
	}
	return parseStolen(line)
}

// parseStolen reads the steal column from /proc/stat's aggregate "cpu"
// line: the eighth number, in USER_HZ ticks, which the kernel fixes at 100
// per second for this file whatever its own tick rate.
func parseStolen(line []byte) (time.Duration, bool) {
	fields := bytes.Fields(line)
	const stealField = 8
	if len(fields) <= stealField || string(fields[0]) != "cpu" {
		return 0, false
	}
	ticks, err := strconv.ParseUint(string(fields[stealField]), 10, 63)
	if err != nil || ticks > uint64(1<<63-1)/uint64(10*time.Millisecond) {
		return 0, false
	}
	return time.Duration(ticks) * 10 * time.Millisecond, true
}
