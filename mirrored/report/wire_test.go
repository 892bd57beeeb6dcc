package report

import "testing"

// TestBytesPerValue: the cost model prices a 16-bit wire's gradient at
// half the bytes; anything else (fp32, an older summary without the
// field) at float32's.
func TestBytesPerValue(t *testing.T) {
	for _, tc := range []struct {
		wire string
		want float64
	}{
		{"", 4}, {"fp32", 4}, {"bf16", 2}, {"fp16", 2}, {"int8", 4},
	} {
		if got := bytesPerValue(tc.wire); got != tc.want {
			t.Errorf("bytesPerValue(%q) = %v, want %v", tc.wire, got, tc.want)
		}
	}
}
