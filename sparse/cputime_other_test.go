//go:build !linux

package sparse_test

// threadCPUSeconds is unavailable here; benchmarks then report wall time only.
func threadCPUSeconds() float64 { return 0 }
