//go:build linux

package rusage

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go runs on (the kernel scales its own HZ to it).
const userHZ = 100

// HostCPU is the time the whole machine's CPUs have been busy since boot,
// every process's (user, nice, system, irq, softirq and steal time from
// /proc/stat; idle and iowait are not busy), or 0 where it cannot be read.
func HostCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ
}

// Load1 is the machine's 1-minute load average (/proc/loadavg):
// the runnable and uninterruptible tasks, meshtrain's own included; -1
// where it cannot be read.
func Load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil {
		return -1
	}
	return v
}
