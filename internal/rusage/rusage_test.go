package rusage

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestCPUTimeGrows: spinning for a while adds CPU time, and the figures
// are plausible.
func TestCPUTimeGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("CPU time is not measured on", runtime.GOOS)
	}
	cpu0 := CPUTime()
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	if cpu := CPUTime(); cpu <= cpu0 {
		t.Errorf("CPU time went from %v to %v after 50ms of spinning (%d iterations)", cpu0, cpu, x)
	}
}

func TestPeakRSS(t *testing.T) {
	rss := PeakRSS()
	if runtime.GOOS != "linux" {
		if rss != 0 {
			t.Errorf("PeakRSS %d outside Linux, want 0", rss)
		}
		return
	}
	// A running Go test binary holds more than 1 MiB and less than 1 TiB.
	if rss < 1<<20 || rss > 1<<40 {
		t.Errorf("PeakRSS %d bytes: implausible", rss)
	}
}

func TestMemoryLimit(t *testing.T) {
	machine, _ := MemoryLimit()
	old := debug.SetMemoryLimit(1 << 20)
	defer debug.SetMemoryLimit(old)
	if n, src := MemoryLimit(); n != 1<<20 || !strings.Contains(src, "GOMEMLIMIT") {
		t.Errorf("with a 1 MiB Go limit: %d from %q", n, src)
	}
	if runtime.GOOS == "linux" && machine <= 1<<20 {
		t.Errorf("without a Go limit: %d bytes, want the machine's or the cgroup's", machine)
	}
}

func TestLoadAverage(t *testing.T) {
	got := LoadAverage()
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		if got != "?" {
			t.Errorf("LoadAverage without /proc/loadavg = %q, want ?", got)
		}
		return
	}
	if f := strings.Fields(got); len(f) != 3 {
		t.Errorf("LoadAverage = %q, want three figures", got)
	}
}

func TestNow(t *testing.T) {
	a := Now()
	x := 0.0
	for i := range 20_000_000 {
		x += float64(i % 7)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	b := Now()
	if b.User+b.System <= a.User+a.System || x == 0 {
		t.Fatalf("CPU time did not grow: %v → %v", a.User+a.System, b.User+b.System)
	}
	if runtime.GOOS == "linux" && (b.RSSBytes < 64<<20 || buf[len(buf)-1] != byte(len(buf)-1)) {
		t.Fatalf("resident set %d bytes with 64 MiB touched", b.RSSBytes)
	}
}
