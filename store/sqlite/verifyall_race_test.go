//go:build race

package sqlite

// raceEnabled skips the memory measurements under the race detector: its
// instrumentation makes them slow and is not what they measure.
const raceEnabled = true
