package half

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestFrameRoundTrip: a frame decodes to the values rounded as the
// format says; fp16's scale keeps tiny and huge chunks from flushing to
// zero or overflowing, and non-finite values stay non-finite.
func TestFrameRoundTrip(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		name string
		f    Format
		in   []float32
		rel  float64 // largest relative error allowed on finite values
	}{
		{"bf16 ordinary", BF16, []float32{1, -0.5, 3.14159, 1e-3, -7e5}, 1.0 / 256},
		{"bf16 subnormals", BF16, []float32{f32(0x00400000), f32(0x00010000)}, 0},
		{"bf16 non-finite", BF16, []float32{inf, -inf, nan, 2}, 0},
		{"fp16 ordinary", FP16, []float32{1, -0.5, 3.14159, 0.125, -100}, 1.0 / 2048},
		{"fp16 tiny gradients", FP16, []float32{1e-9, -3e-10, 2.5e-9}, 1.0 / 2048},
		{"fp16 beyond its range", FP16, []float32{1e6, -3e7, 65520, 70000}, 1.0 / 2048},
		{"fp16 float32 subnormals", FP16, []float32{f32(0x00000007), f32(0x00000003)}, 0.25},
		{"fp16 largest float32", FP16, []float32{math.MaxFloat32, -1e38}, 1.0 / 2048},
		{"fp16 non-finite", FP16, []float32{inf, -inf, nan, 2, -1e-3}, 1.0 / 2048},
		{"fp16 all zero", FP16, []float32{0, 0}, 0},
		{"empty", FP16, nil, 0},
	} {
		b := AppendFrame([]byte{0xee}, tc.f, tc.in)[1:]
		if len(b) != FrameLen(len(tc.in)) {
			t.Fatalf("%s: %d-byte frame for %d values", tc.name, len(b), len(tc.in))
		}
		out := make([]float32, len(tc.in))
		if err := DecodeFrame(b, tc.f, out); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, v := range tc.in {
			g := out[i]
			switch {
			case math.IsNaN(float64(v)):
				if !math.IsNaN(float64(g)) {
					t.Errorf("%s: NaN came back as %g", tc.name, g)
				}
			case math.IsInf(float64(v), 0):
				if g != v {
					t.Errorf("%s: %g came back as %g", tc.name, v, g)
				}
			default:
				if math.IsInf(float64(g), 0) || math.IsNaN(float64(g)) {
					t.Errorf("%s: finite %g came back as %g", tc.name, v, g)
				}
				if d := math.Abs(float64(g - v)); d > tc.rel*math.Abs(float64(v)) {
					t.Errorf("%s: %g came back as %g (relative error %.3g, want ≤ %.3g)", tc.name, v, g, d/math.Abs(float64(v)), tc.rel)
				}
			}
		}
		// Adding the frame to x adds the decoded values in float32.
		acc := make([]float32, len(tc.in))
		for i := range acc {
			acc[i] = 1
		}
		if err := AddFrame(b, tc.f, acc); err != nil {
			t.Fatalf("%s: add: %v", tc.name, err)
		}
		for i := range acc {
			if want := 1 + out[i]; math.Float32bits(acc[i]) != math.Float32bits(want) && !math.IsNaN(float64(want)) {
				t.Errorf("%s: 1 + frame value %d = %g, want %g", tc.name, i, acc[i], want)
			}
		}
		// A second trip changes nothing: what a frame decodes to is
		// exactly representable.
		again := append([]float32(nil), out...)
		Round(tc.f, again, len(again))
		for i := range again {
			if math.Float32bits(again[i]) != math.Float32bits(out[i]) && !math.IsNaN(float64(out[i])) {
				t.Errorf("%s: value %d rounded again from %g to %g", tc.name, i, out[i], again[i])
			}
		}
	}
}

// TestFrameScale: the scale puts the chunk's largest magnitude in
// [2^14, 2^15), ignoring Inf and NaN.
func TestFrameScale(t *testing.T) {
	for _, tc := range []struct {
		in   []float32
		want int
	}{
		{[]float32{1}, 14},
		{[]float32{-1.5, 0.1}, 14},
		{[]float32{32767}, 0},
		{[]float32{32768}, -1},
		{[]float32{1e-9, float32(math.Inf(1)), float32(math.NaN())}, 44},
		{[]float32{f32(1)}, MaxScale},
		{[]float32{math.MaxFloat32}, MinScale},
		{[]float32{0, float32(math.Inf(-1))}, 0},
	} {
		if got := Scale(tc.in); got != tc.want {
			t.Errorf("Scale(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestFrameErrors: every malformed frame is refused with a reason.
func TestFrameErrors(t *testing.T) {
	good := AppendFrame(nil, FP16, []float32{1, 2, 3})
	scaled := func(e int) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint16(b[2:], uint16(int16(e)))
		return b
	}
	bf := AppendFrame(nil, BF16, []float32{1, 2, 3})
	bfScaled := append([]byte(nil), bf...)
	bfScaled[2] = 1
	reserved := append([]byte(nil), good...)
	reserved[1] = 7
	for _, tc := range []struct {
		name  string
		b     []byte
		f     Format
		count int
		want  string
	}{
		{"short", good[:3], FP16, 3, "shorter than its"},
		{"another format", bf, FP16, 3, "peers must share --wire"},
		{"reserved byte", reserved, FP16, 3, "reserved byte 7"},
		{"too few values", good[:len(good)-2], FP16, 3, "want 10"},
		{"too many values", good, FP16, 2, "want 8"},
		{"scale too large", scaled(MaxScale + 1), FP16, 3, "scale exponent"},
		{"scale too small", scaled(MinScale - 1), FP16, 3, "scale exponent"},
		{"scaled bf16", bfScaled, BF16, 3, "never scaled"},
		{"fp32 is no frame", append([]byte{0}, good[1:]...), FP32, 3, "fp32"},
	} {
		err := DecodeFrame(tc.b, tc.f, make([]float32, tc.count))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestParseFormat: the --wire values and nothing else.
func TestParseFormat(t *testing.T) {
	for _, s := range []string{"fp32", "bf16", "fp16"} {
		f, err := ParseFormat(s)
		if err != nil || f.String() != s {
			t.Errorf("ParseFormat(%q) = %v, %v", s, f, err)
		}
	}
	for _, s := range []string{"", "FP16", "float16", "int8"} {
		if _, err := ParseFormat(s); err == nil || !strings.Contains(err.Error(), "want fp32") {
			t.Errorf("ParseFormat(%q): %v, want refused", s, err)
		}
	}
}

// FuzzDecodeFrame: any bytes either decode into the values a frame of
// that format can hold (re-encoding to the same values) or are refused;
// nothing panics or reads past the frame.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, FP16, []float32{1, -2, 1e-9}), uint8(FP16), 3)
	f.Add(AppendFrame(nil, BF16, []float32{1, float32(math.NaN())}), uint8(BF16), 2)
	f.Add([]byte{2, 0, 0xff, 0x7f, 1, 2}, uint8(FP16), 1)
	f.Add([]byte{}, uint8(BF16), 0)
	f.Fuzz(func(t *testing.T, b []byte, format uint8, count int) {
		if count < 0 || count > 1<<16 {
			return
		}
		fm := Format(format)
		out := make([]float32, count)
		if err := DecodeFrame(b, fm, out); err != nil {
			return
		}
		if !fm.Half() || len(b) != FrameLen(count) {
			t.Fatalf("accepted a %d-byte frame of %s for %d values", len(b), fm, count)
		}
		for i, v := range out {
			if math.IsNaN(float64(v)) {
				continue
			}
			// Alone in a frame (for fp16, its own chunk's largest, so
			// scaled into fp16's best binade) v must survive the trip
			// exactly, short of float32's subnormals.
			again := []float32{v}
			Round(fm, again, 1)
			if math.Float32bits(again[0]) != math.Float32bits(v) && !(v != 0 && math.Abs(float64(v)) < 0x1p-126) {
				t.Fatalf("value %d: decoded %g, which a frame carries as %g", i, v, again[0])
			}
		}
	})
}

// TestFrameScaledExactly: whatever the chunk's magnitude, each value of
// an fp16 frame is fp16(v·2^e) with the product exact, and decodes to
// fp16·2^-e rounded once to float32 (saturating at float32's largest):
// the float32 fast paths give the bits of exact arithmetic.
func TestFrameScaledExactly(t *testing.T) {
	rng := uint64(1)
	next := func() float64 { // xorshift: a fixed sequence in (-1, 1)
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return float64(int64(rng>>11)-(1<<52)) / (1 << 52)
	}
	for k := -149; k <= 128; k += 3 {
		src := make([]float32, 64)
		for i := range src {
			src[i] = float32(math.Ldexp(next(), k-int(i%20)))
		}
		e := Scale(src)
		b := AppendFrame(nil, FP16, src)
		out := make([]float32, len(src))
		if err := DecodeFrame(b, FP16, out); err != nil {
			t.Fatalf("2^%d: %v", k, err)
		}
		for i, v := range src {
			h := binary.LittleEndian.Uint16(b[FrameHeader+2*i:])
			if want := FP16FromFloat32(float32(float64(v) * math.Ldexp(1, e))); h != want {
				t.Fatalf("2^%d value %d (%g, scale 2^%d): encoded %#04x, exact arithmetic gives %#04x", k, i, v, e, h, want)
			}
			want := float32(float64(FP16ToFloat32(h)) * math.Ldexp(1, -e))
			if math.IsInf(float64(want), 0) {
				want = float32(math.Copysign(math.MaxFloat32, float64(want)))
			}
			if math.Float32bits(out[i]) != math.Float32bits(want) {
				t.Fatalf("2^%d value %d: decoded %g, exact arithmetic gives %g", k, i, out[i], want)
			}
		}
	}
}
