//go:build !unix

package journalstore

import (
	"io"
	"os"
)

// lockFile creates path but cannot lock it where flock is not available:
// there the operator must keep to one JournalStorage per journal tenant.
func lockFile(path string) (io.Closer, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
