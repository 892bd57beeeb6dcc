//go:build !linux

package mirrored

// processUsage is not measured outside Linux (ru_maxrss units differ and
// some systems lack getrusage); the summary then shows zeros.
func processUsage() (cpuSeconds float64, peakRSS int64) { return 0, 0 }
