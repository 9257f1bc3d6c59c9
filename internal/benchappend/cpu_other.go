//go:build !unix

package benchappend

import "time"

// processCPU is 0 where the platform has no getrusage.
func processCPU() time.Duration { return 0 }
