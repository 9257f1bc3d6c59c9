//go:build !unix

package main

// lockDir is a no-op where flock is not available: the operator must not
// run two monitors on one state directory.
func lockDir(string) (func(), error) { return func() {}, nil }
