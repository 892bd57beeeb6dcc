//go:build linux

package mirrored

import "syscall"

// processUsage returns this process's CPU seconds (user + system) and peak
// resident set size in bytes (Linux reports ru_maxrss in KiB).
func processUsage() (cpuSeconds float64, peakRSS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	return cpu, int64(ru.Maxrss) * 1024
}
