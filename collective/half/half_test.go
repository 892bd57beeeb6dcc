package half

import (
	"math"
	"math/big"
	"sort"
	"testing"
)

func f32(b uint32) float32 { return math.Float32frombits(b) }

// TestBF16Table: rounding to nearest even, the ends of the range, NaN,
// Inf and subnormals.
func TestBF16Table(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"below halfway rounds down", f32(0x3f807fff), 0x3f80},
		{"halfway to even (down)", f32(0x3f808000), 0x3f80},
		{"halfway to even (up)", f32(0x3f818000), 0x3f82},
		{"above halfway rounds up", f32(0x3f808001), 0x3f81},
		{"carry into the exponent", f32(0x3fffffff), 0x4000},
		{"float32 subnormal", f32(0x00012345), 0x0001},
		{"smallest float32 subnormal", f32(0x00000001), 0x0000},
		{"largest bf16", f32(0x7f7f0000), 0x7f7f},
		{"largest float32 saturates", math.MaxFloat32, 0x7f7f},
		{"minus largest float32 saturates", -math.MaxFloat32, 0xff7f},
		{"inf", float32(math.Inf(1)), 0x7f80},
		{"minus inf", float32(math.Inf(-1)), 0xff80},
		{"nan with low payload stays nan", f32(0x7f800001), 0x7fc0},
		{"negative quiet nan", f32(0xffc00000), 0xffc0},
	} {
		if got := BF16FromFloat32(tc.in); got != tc.want {
			t.Errorf("%s: BF16FromFloat32(%g = %#08x) = %#04x, want %#04x", tc.name, tc.in, math.Float32bits(tc.in), got, tc.want)
		}
	}
}

// TestFP16Table: IEEE binary16 rounding at the ends of its range.
func TestFP16Table(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one third", 1.0 / 3, 0x3555},
		{"halfway to even (down)", 1 + 1.0/2048, 0x3c00},
		{"halfway to even (up)", 1 + 3.0/2048, 0x3c02},
		{"largest finite", 65504, 0x7bff},
		{"just below the Inf threshold", 65519, 0x7bff},
		{"halfway past the largest becomes Inf", 65520, 0x7c00},
		{"beyond the range", 1e6, 0x7c00},
		{"minus beyond the range", -1e6, 0xfc00},
		{"smallest normal", 1.0 / 16384, 0x0400},
		{"largest subnormal", 1023.0 / (1 << 24), 0x03ff},
		{"subnormal rounds up into the smallest normal", (1023.5 + 0.25) / (1 << 24), 0x0400},
		{"smallest subnormal", 1.0 / (1 << 24), 0x0001},
		{"half the smallest subnormal ties to zero", 1.0 / (1 << 25), 0x0000},
		{"above half the smallest rounds up", 1.0/(1<<25) + 1.0/(1<<30), 0x0001},
		{"subnormal tie to even (up)", 1.5 / (1 << 24), 0x0002},
		{"subnormal tie to even (down)", 2.5 / (1 << 24), 0x0002},
		{"float32 subnormal flushes", f32(0x00000123), 0x0000},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"minus inf", float32(math.Inf(-1)), 0xfc00},
		{"nan stays nan", f32(0x7f800001), 0x7e00},
	} {
		if got := FP16FromFloat32(tc.in); got != tc.want {
			t.Errorf("%s: FP16FromFloat32(%g) = %#04x, want %#04x", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestRoundTripsExhaustive: every 16-bit pattern widens to a float32
// that rounds back to the same pattern (NaNs to a NaN), in both formats.
func TestRoundTripsExhaustive(t *testing.T) {
	for h := range 1 << 16 {
		u := uint16(h)
		if v := BF16ToFloat32(u); math.IsNaN(float64(v)) {
			if g := BF16FromFloat32(v); g&0x7f80 != 0x7f80 || g&0x7f == 0 {
				t.Fatalf("bf16 NaN %#04x came back as %#04x", u, g)
			}
		} else if g := BF16FromFloat32(v); g != u {
			t.Fatalf("bf16 %#04x → %g → %#04x", u, v, g)
		}
		if v := FP16ToFloat32(u); math.IsNaN(float64(v)) {
			if g := FP16FromFloat32(v); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("fp16 NaN %#04x came back as %#04x", u, g)
			}
		} else if g := FP16FromFloat32(v); g != u {
			t.Fatalf("fp16 %#04x → %g → %#04x", u, v, g)
		}
	}
}

// TestFP16Nearest checks FP16FromFloat32 against exact rational
// arithmetic: on a sweep of float32 values across fp16's range the
// result is one of the two neighbours, the nearer, and the even one on a
// tie.
func TestFP16Nearest(t *testing.T) {
	var finite []uint16 // positive finite fp16 values, ascending
	for h := uint16(0); h < 0x7c00; h++ {
		finite = append(finite, h)
	}
	exact := func(h uint16) *big.Rat { return new(big.Rat).SetFloat64(float64(FP16ToFloat32(h))) }
	for b := uint32(0x33000000); b < 0x477ff000; b += 0x2f1b { // 2^-25 up to the last binade
		v := f32(b)
		got := FP16FromFloat32(v)
		x := new(big.Rat).SetFloat64(float64(v))
		// the neighbours: the largest fp16 ≤ v and the next one
		lo := sort.Search(len(finite), func(i int) bool { return exact(finite[i]).Cmp(x) > 0 }) - 1
		a, c := finite[lo], finite[min(lo+1, len(finite)-1)]
		da := new(big.Rat).Sub(x, exact(a))
		dc := new(big.Rat).Sub(exact(c), x)
		want := a
		switch da.Cmp(dc) {
		case 1:
			want = c
		case 0:
			if a&1 == 1 {
				want = c
			}
		}
		if got != want {
			t.Fatalf("FP16FromFloat32(%g) = %#04x (%g), want %#04x (%g)", v, got, FP16ToFloat32(got), want, FP16ToFloat32(want))
		}
	}
}
