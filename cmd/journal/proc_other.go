//go:build !linux

package main

// peakRSSKiB is unknown where /proc is not there to ask.
func peakRSSKiB() (int64, bool) { return 0, false }

// loadAverage is unknown (-1) here.
func loadAverage() float64 { return -1 }
