//go:build unix && !linux

package main

import (
	"os"
	"syscall"
	"time"
)

// childUsage is a finished child's peak resident set in bytes (ru_maxrss is
// in bytes on the BSDs and macOS) and its CPU time.
func childUsage(ps *os.ProcessState) (int64, time.Duration) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0
	}
	return int64(ru.Maxrss), time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is not measured here; bench reports wall-clock rates only.
func threadCPU() time.Duration { return 0 }

func selfRSS() int64 { return 0 }
