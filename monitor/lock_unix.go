//go:build unix

package monitor

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on path so that two monitors never race
// on one state directory; the kernel drops it if the process dies.
func lockDir(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: another monitor holds %s", ErrLocked, path)
	}
	return func() { f.Close() }, nil
}

const lockDirIsNoop = false
