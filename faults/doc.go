// Package faults is runseal's fault campaign: tests that inject the faults
// a deployment meets (a full disk, a PostgreSQL restart, a witness that
// hangs or lies, a clock that jumps, serve killed at its worst moments)
// into the real programs where practical and into the libraries
// otherwise, and check afterwards what must always hold: no acknowledged
// write lost, no two different checkpoints signed for one size and no
// signed size going backwards, the whole log verifies, and the service
// recovers by itself or names what the operator must do.
//
// The tests skip unless RUNSEAL_FAULTS=1, so the default test run stays
// fast; scripts/faults.sh sets up what they need (root for a tmpfs mount,
// PostgreSQL) and runs them. docs/faults.md holds the table of results.
package faults
