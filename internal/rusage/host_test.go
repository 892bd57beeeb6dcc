package rusage

import (
	"runtime"
	"testing"
	"time"
)

// TestHostCPUSeesThisProcess: spinning a core for 300 ms shows in the
// machine's busy time at least as much as it shows in the process's, to
// the jiffy (the machine's includes everyone else's).
func TestHostCPUSeesThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("host CPU time is read from /proc/stat")
	}
	h0, p0 := HostCPU(), CPUTime()
	if h0 <= 0 {
		t.Fatalf("HostCPU = %v, want the busy time since boot", h0)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	h1, p1 := HostCPU(), CPUTime()
	if own := p1 - p0; h1-h0 < own-20*time.Millisecond {
		t.Errorf("the machine was busy %v while this process alone spent %v", h1-h0, own)
	}
	busy, wall := HostCPUSinceStart()
	if busy < h1-h0-20*time.Millisecond || wall <= 0 {
		t.Errorf("since start: busy %v over %v, want at least the %v just spent", busy, wall, h1-h0)
	}
	if l := Load1(); l < 0 {
		t.Errorf("Load1 = %v, want /proc/loadavg's first figure", l)
	}
}
