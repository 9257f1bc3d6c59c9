//go:build unix

package journalstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// lockFile takes an exclusive flock on path, creating it. flock locks
// belong to the open file description, so a second lock in the same
// process is refused like one from another process.
func lockFile(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Lock: path, Holder: holder(path)}
		}
		return nil, err
	}
	// Say who holds it, for the refusal of the next one; the lock does not
	// depend on it.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
	}
	return f, nil
}

func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 64 {
		return ""
	}
	return strings.TrimSpace(string(b))
}
