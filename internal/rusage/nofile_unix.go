//go:build unix

package rusage

import (
	"math"
	"syscall"
)

// OpenFilesLimit is the soft limit on this process's open files (ulimit
// -n, RLIMIT_NOFILE); 0 when there is none or it is not known.
func OpenFilesLimit() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt64 {
		return 0
	}
	return int64(rl.Cur)
}
