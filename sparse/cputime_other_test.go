//go:build !linux

package sparse

// threadCPUSeconds is unavailable here; benchmarks then report wall time only.
func threadCPUSeconds() float64 { return 0 }
