package benchappend

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"github.com/runseal/runseal/internal/benchjournal"
)

// usage is what this process has consumed: CPU time (user and system) and
// bytes passed to write system calls.
type usage struct {
	cpu     time.Duration
	written int64
}

func (u usage) add(v usage) usage { return usage{u.cpu + v.cpu, u.written + v.written} }
func (u usage) sub(v usage) usage { return usage{u.cpu - v.cpu, u.written - v.written} }

// readUsage reads the process's usage now; a figure the platform does not
// give stays 0.
func readUsage() usage {
	return usage{cpu: benchjournal.ProcessCPU(), written: writtenBytes()}
}

// writtenBytes is the "wchar" line of Linux's /proc/self/io: the bytes this
// process has passed to write(2) and its kin, whether or not they reached
// the disk yet (an fsync makes them); 0 where there is no such file.
func writtenBytes() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(line, []byte("wchar: ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}
