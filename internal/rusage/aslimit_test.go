//go:build linux

package rusage

import (
	"strings"
	"syscall"
	"testing"
)

// TestMemoryLimitCountsUlimitV: a soft address-space limit (ulimit -v)
// bounds MemoryLimit by what it leaves beyond what the process has mapped
// (issue 24 item 8: the memory check ignored it, so a run it would end
// passed the check and died in the runtime).
func TestMemoryLimitCountsUlimitV(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Skip(err)
	}
	mapped := vmSize()
	if mapped == 0 {
		t.Skip("no VmSize")
	}
	const room = 1 << 30
	lim := old
	lim.Cur = uint64(mapped + room)
	if lim.Cur > lim.Max {
		t.Skipf("hard limit %d too low", lim.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Skip(err)
	}
	n, src := MemoryLimit()
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &old); err != nil { // raising the soft limit back to what it was
		t.Fatal(err)
	}
	if n <= 0 || n > room || !strings.Contains(src, "ulimit -v") {
		t.Errorf("with ulimit -v at %d mapped + 1 GiB: %d bytes from %q, want at most 1 GiB from the address-space limit", mapped, n, src)
	}
}
