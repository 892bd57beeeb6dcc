//go:build !unix

package rusage

import "time"

// CPUTime is not measured on systems without getrusage: it returns 0.
func CPUTime() time.Duration { return 0 }
