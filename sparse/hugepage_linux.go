package sparse

import (
	"syscall"
	"unsafe"
)

// madvCollapse is MADV_COLLAPSE (Linux 6.1): back a range with huge pages now.
const madvCollapse = 25

// hugePage is the size of an x86-64 transparent huge page.
const hugePage = 2 << 20

// makeFloats returns a zeroed []float32 of length n whose storage the kernel
// is asked to back with transparent huge pages. A weight vector or optimizer
// state of 33.7M features is 135 MB read at random indices: with 4 KB pages
// nearly every access also misses the TLB (and under virtualisation a page
// walk costs several more memory reads), with 2 MB pages the whole array
// fits in the TLB. The advice is best effort: where huge pages are
// unavailable the memory behaves exactly as make's.
func makeFloats(n int) []float32 {
	s := make([]float32, n)
	if n*4 < 2*hugePage {
		return s
	}
	base := uintptr(unsafe.Pointer(&s[0]))
	lo := (base + hugePage - 1) &^ (hugePage - 1)
	hi := (base + uintptr(n)*4) &^ (hugePage - 1)
	if hi <= lo {
		return s
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&s[0]), lo-base)), hi-lo)
	if syscall.Madvise(b, syscall.MADV_HUGEPAGE) == nil {
		// Pages the allocator already zeroed (reused heap memory) are
		// mapped small; collapse them now rather than wait for khugepaged.
		_ = syscall.Madvise(b, madvCollapse)
		// Fault the rest in now, at start-up, rather than 2 MB at a time
		// in the first training steps (each first touch zeroes a page).
		for i := 0; i < len(b); i += hugePage {
			b[i] = 0
		}
	}
	return s
}
