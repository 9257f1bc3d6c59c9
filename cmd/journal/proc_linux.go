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

// loadAverage is the 1-minute load average, or -1. A bench on a machine
// that other work keeps busy measures that work too; the report says so.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
