package rusage

import (
	"os"
	"strings"
)

// LoadAverage is the machine's load average over 1, 5 and 15 minutes (the
// first three fields of /proc/loadavg), or "?" where there is none: every
// measurement on a shared machine is recorded with it.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
