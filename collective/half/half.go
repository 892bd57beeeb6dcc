// Package half holds the 16-bit number formats a gradient can travel in
// (meshtrain's --wire bf16 and fp16) and the frame that carries a chunk of
// them: conversions to and from float32, and a chunk's encoding with its
// scale. The arithmetic stays in float32: a 16-bit value is only ever a
// float32 rounded for the trip.
//
// Rounding is to nearest, ties to even, for both formats.
//
//   - bfloat16 keeps float32's 8-bit exponent and 7 of its 23 fraction
//     bits, so it covers float32's whole range and needs no scale. NaN
//     stays NaN (made quiet: a NaN whose payload lies only in the dropped
//     bits would otherwise become Inf); ±Inf stays ±Inf; a finite value
//     beyond bfloat16's largest finite (about 3.3895e38) saturates to it
//     instead of rounding to Inf, so a finite gradient never becomes
//     infinite on the wire. Float32 subnormals round like any other value
//     (bfloat16 has the same subnormals, at 7 bits).
//   - IEEE binary16 (fp16) has 10 fraction bits but a 5-bit exponent:
//     finite magnitudes from 2^-24 (subnormal) to 65504. Gradients are
//     often far smaller than 2^-24 and would flush to zero, so a frame of
//     fp16 carries a scale: a power of two 2^e chosen from the chunk's
//     largest finite magnitude m so that m·2^e lies in [2^14, 2^15). Every
//     value is sent as fp16(v·2^e) and read back as fp16·2^-e. Values
//     within a factor 2^38 below the chunk's largest keep at least one
//     significant bit; smaller ones flush to zero (they are below 2^-38 of
//     the chunk's largest, far inside float32 rounding of the sum they
//     join). Since m·2^e < 2^15 ≤ 65504, no finite value overflows: the
//     scale is the answer to "overflow must not produce Inf". A NaN or
//     ±Inf in the float32 chunk is sent as fp16 NaN or ±Inf and arrives as
//     such, as it would in float32.
//
// Powers of two scale exactly, so the scale adds no rounding of its own
// except below float32's normal range, where the value read back rounds
// once (to a float32 subnormal).
//
// The conversions are written here rather than taken from a library:
// github.com/x448/float16 (the usual Go choice) is not among the Go
// modules this project's machines offer, and the two conversions are
// short bit manipulations checked exhaustively against every fp16 and
// bfloat16 value in the tests.
package half

import (
	"fmt"
	"math"
)

// Format is how a gradient's values travel between peers.
type Format uint8

// The formats. FP32 is the default: the values travel as they are.
const (
	FP32 Format = iota
	BF16
	FP16
	formatEnd
)

var formatNames = [...]string{"fp32", "bf16", "fp16"}

func (f Format) String() string {
	if f < formatEnd {
		return formatNames[f]
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

// ParseFormat reads a --wire value: fp32, bf16 or fp16.
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if s == n {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("wire format %q: want fp32 (the default), bf16 or fp16", s)
}

// Half reports whether f is one of the 16-bit formats.
func (f Format) Half() bool { return f == BF16 || f == FP16 }

// bf16MaxFinite is bfloat16's largest finite magnitude's bits.
const bf16MaxFinite = 0x7f7f

// BF16FromFloat32 rounds v to bfloat16, to nearest with ties to even;
// NaN stays (quiet) NaN and a finite v saturates at ±3.3895e38 rather
// than becoming ±Inf (see the package doc).
func BF16FromFloat32(v float32) uint16 {
	b := math.Float32bits(v)
	if b&0x7f800000 == 0x7f800000 { // ±Inf or NaN: rare, kept out of the loop's way
		if b&0x7fffff != 0 {
			return uint16(b>>16) | 0x0040
		}
		return uint16(b >> 16)
	}
	h := uint16((b + 0x7fff + (b>>16)&1) >> 16)
	if h&0x7f80 == 0x7f80 { // a finite value rounded up to ±Inf
		return h - 1 // ±bf16MaxFinite
	}
	return h
}

// BF16ToFloat32 widens a bfloat16 to float32 (exactly).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP16FromFloat32 rounds v to IEEE binary16, to nearest with ties to
// even, as IEEE 754 says: magnitudes from 65520 up become ±Inf, below
// 2^-25 ±0. The frame's scale keeps finite gradients away from both ends.
func FP16FromFloat32(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	frac := b & 0x7fffff
	e := int(b>>23)&0xff - 127 + 15 // fp16 biased exponent
	if uint(e-1) < 0x1e {
		// Normal in fp16, the usual case first: a carry out of the
		// fraction rounds up to the next binade, or from the last to Inf.
		h := uint32(e)<<10 | frac>>13
		rem := frac & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	switch {
	case e == 0xff-127+15 && frac != 0: // NaN: keep the top payload bits, quiet
		return sign | 0x7e00 | uint16(frac>>13)
	case e >= 0x1f: // ±Inf, or beyond fp16's range
		return sign | 0x7c00
	case e < -10:
		return sign // below half the smallest subnormal: ±0
	}
	// Subnormal in fp16: the implicit bit joins the fraction, shifted
	// right by 1-e more places; rounding up may carry into the smallest
	// normal, which is still correct.
	m := frac | 0x800000
	shift := uint(14 - e) // 13 + (1 - e)
	h := m >> shift
	rem := m & (1<<shift - 1)
	halfway := uint32(1) << (shift - 1)
	if rem > halfway || (rem == halfway && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// FP16ToFloat32 widens an IEEE binary16 to float32 (exactly).
func FP16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	if exp-1 < 0x1e { // normal, the usual case first
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	}
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: frac·2^-24, exact in float32.
	v := float32(frac) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}
