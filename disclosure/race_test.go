//go:build race

package disclosure

const raceEnabled = true
