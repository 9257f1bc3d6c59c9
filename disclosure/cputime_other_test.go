//go:build !unix

package disclosure

import "time"

// processCPU is unknown here: the MB/cpu-s metric is left out.
func processCPU() time.Duration { return 0 }
