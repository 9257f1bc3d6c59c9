//go:build !unix

package connlimit

// openFileLimit is 1024 where there is no RLIMIT_NOFILE to read.
func openFileLimit() uint64 { return 1024 }
