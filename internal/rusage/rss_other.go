//go:build !linux

package rusage

// PeakRSS is not measured outside Linux (ru_maxrss units differ, and some
// systems lack getrusage): it returns 0.
func PeakRSS() int64 { return 0 }
