//go:build unix

package rusage

import (
	"syscall"
	"time"
)

// CPUTime returns this process's user + system CPU time so far, or 0 if
// getrusage fails.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
