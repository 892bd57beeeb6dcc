//go:build linux

package intrahost

import (
	"testing"
	"unsafe"

	"github.com/meshtrain/meshtrain/collective"
)

// TestPlaceAligned: every ring payload starts 8-byte aligned, whatever the
// sizes of the frames before it, so that a fold viewing it as float64 or
// float32 (unsafe.Slice) never reads misaligned floats (vector loads
// split across cache lines; a fault on strict-alignment architectures).
func TestPlaceAligned(t *testing.T) {
	const size = 64
	for _, tc := range []struct {
		at   uint64
		n    int
		want int
	}{
		{0, 8, 0},
		{6, 16, 8},
		{2, 4, 8},
		{60, 8, 0},      // would not fit before the end: wraps
		{57, 4, 0},      // rounds to 64, the ring's start
		{64 + 3, 32, 8}, // second lap
		{50, 16, 0},     // rounds to 56, does not fit: wraps
	} {
		off, next := place(tc.at, tc.n, size)
		if off != tc.want || off+tc.n > size || next < tc.at+uint64(tc.n) {
			t.Errorf("place(%d, %d): off %d next %d, want off %d", tc.at, tc.n, off, next, tc.want)
		}
	}
	s, r := link(t)
	for _, n := range []int{6, 16, 2, 3, 24} {
		go func() {
			_ = s.Send(t.Context(), collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, make([]byte, n))
		}()
		h, pr, err := r.Next(1 << 20)
		if err != nil || int(h.Len) != n {
			t.Fatalf("frame of %d bytes: %v (len %d)", n, err, h.Len)
		}
		b := pr.(interface{ Next(int) []byte }).Next(n)
		if p := uintptr(unsafe.Pointer(&b[0])); p%8 != 0 {
			t.Errorf("a %d-byte payload at address %#x, not 8-byte aligned", n, p)
		}
		r.Done()
	}
}
