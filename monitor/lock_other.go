//go:build !unix

package monitor

// lockDir is a no-op where flock is not available: the operator must not
// run two monitors on one state directory.
func lockDir(string) (func(), error) { return func() {}, nil }

const lockDirIsNoop = true
