//go:build !amd64 || purego

package sparse

import "unsafe"

// prefetchIndexed is a no-op where there is no assembly version.
func prefetchIndexed(base unsafe.Pointer, idx []int32, shift uint) {}
