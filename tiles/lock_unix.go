//go:build unix

package tiles

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking lock on name under root, so
// that two syncs never write one directory at once; the kernel drops it
// when the process dies, so a killed sync leaves no stale lock.
func lockFile(root *os.Root, name string) (func(), error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: another sync holds the lock", ErrBusy)
	}
	return func() { f.Close() }, nil
}
