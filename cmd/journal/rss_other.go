//go:build !linux

package main

import "os"

// peakRSSMiB is 0 (unknown) where rusage units differ or do not exist.
func peakRSSMiB(*os.ProcessState) float64 { return 0 }
