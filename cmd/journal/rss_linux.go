package main

import (
	"os"
	"syscall"
)

// peakRSSMiB is a finished child's peak resident set; Linux reports KiB.
func peakRSSMiB(ps *os.ProcessState) float64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
