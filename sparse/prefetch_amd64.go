//go:build !purego

package sparse

import "unsafe"

// prefetchIndexed asks the CPU to start loading the cache lines at
// base + idx[k]<<shift (shift 2 for a []float32 indexed by idx, 3 for two
// interleaved float32s per index). On a 135 MB weight vector almost every
// rarely-seen feature is a cache miss; issuing them all before the loop that
// needs them overlaps their latencies instead of paying them one window of
// out-of-order execution at a time.
//
//go:noescape
func prefetchIndexed(base unsafe.Pointer, idx []int32, shift uint)
