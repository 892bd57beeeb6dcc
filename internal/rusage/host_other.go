//go:build !linux

package rusage

import "time"

// HostCPU is 0: the machine's busy time is read from Linux's /proc/stat.
func HostCPU() time.Duration { return 0 }

// Load1 is -1: it is read from Linux's /proc/loadavg.
func Load1() float64 { return -1 }
