package rusage

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimit returns the most memory this process may use, in bytes, and
// what sets it: the Go runtime's limit (GOMEMLIMIT or
// debug.SetMemoryLimit), the cgroup's memory.max, what the address-space
// limit (ulimit -v, RLIMIT_AS) leaves beyond what is mapped already, or
// the machine's physical memory, whichever is least. 0 means none is
// known.
func MemoryLimit() (bytes int64, source string) {
	consider := func(b int64, s string) {
		if b > 0 && (bytes == 0 || b < bytes) {
			bytes, source = b, s
		}
	}
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		consider(l, "the Go memory limit (GOMEMLIMIT)")
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(f); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v < 1<<60 {
				consider(v, "the cgroup limit ("+f+")")
			}
		}
	}
	consider(addressSpaceLeft(), "what the address-space limit (ulimit -v) leaves beyond what is mapped")
	consider(memTotal(), "the machine's memory (MemTotal)")
	return bytes, source
}

// memTotal is /proc/meminfo's MemTotal in bytes, 0 where it is not known.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
