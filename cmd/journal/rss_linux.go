package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// peakRSSKiB is this process's peak resident set (VmHWM). It is read from
// /proc rather than getrusage because ru_maxrss survives exec: a child
// started from a large parent reports the parent's high-water mark.
func peakRSSKiB() (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
