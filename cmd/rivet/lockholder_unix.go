//go:build unix

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder names the process holding a lock on path, as " (pid N, name)",
// where the OS can tell (Linux's /proc/locks); "" elsewhere.
func lockHolder(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := ":" + strconv.FormatUint(uint64(st.Ino), 10)
	self := os.Getpid()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a blocked
		// waiter's line has "->" after the number.
		fields := strings.Fields(strings.Replace(sc.Text(), "->", "", 1))
		if len(fields) < 6 || !strings.HasSuffix(fields[5], want) {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid == self || pid <= 0 {
			continue
		}
		name, _ := os.ReadFile("/proc/" + fields[4] + "/comm")
		if n := strings.TrimSpace(string(name)); n != "" {
			return fmt.Sprintf(" (pid %d, %s)", pid, n)
		}
		return fmt.Sprintf(" (pid %d)", pid)
	}
	return ""
}
