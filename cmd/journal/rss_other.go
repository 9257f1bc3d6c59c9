//go:build !linux

package main

// peakRSSKiB is unknown where /proc is not there to ask.
func peakRSSKiB() (int64, bool) { return 0, false }
