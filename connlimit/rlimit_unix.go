//go:build unix

package connlimit

import "syscall"

// openFileLimit is the process's RLIMIT_NOFILE soft limit (which the Go
// runtime raises to the hard limit at start), 1024 when it cannot be read.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	return uint64(rl.Cur)
}
