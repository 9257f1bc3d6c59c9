//go:build !race

package disclosure

const raceEnabled = false
