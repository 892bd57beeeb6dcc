//go:build unix

package rusage

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// addressSpaceLeft is what the soft address-space limit (ulimit -v,
// RLIMIT_AS) leaves this process to map: the limit less what is mapped
// already (VmSize), which a Go process reserves ahead of its use. 0 when
// there is no such limit.
func addressSpaceLeft() int64 {
	var rl syscall.Rlimit
	// RLIM_INFINITY is all ones: past MaxInt64.
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err != nil || rl.Cur > math.MaxInt64 {
		return 0
	}
	left := int64(rl.Cur) - vmSize()
	return max(left, 1) // 1: a limit all used up is still a limit
}

// vmSize is /proc/self/status's VmSize in bytes, 0 where it is not known.
func vmSize() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "VmSize:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
