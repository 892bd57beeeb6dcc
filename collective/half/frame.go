package half

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// A frame carries one chunk of a gradient in a 16-bit format:
//
//	byte 0     the format (BF16 or FP16)
//	byte 1     zero (reserved)
//	bytes 2-3  the scale exponent e, int16 little-endian (0 for BF16)
//	bytes 4-   the values, uint16 little-endian, value = format(h)·2^-e
//
// The receiver knows the element count from the collective's header, and
// the decoder checks the length against it before reading a value.
const FrameHeader = 4

// The scale exponents a frame may carry: e = 15 - k for a largest
// magnitude m = f·2^k (f in [0.5, 1)), and float32's finite magnitudes
// have k from -148 (the smallest subnormal) to 128.
const (
	MinScale = 15 - 128
	MaxScale = 15 + 148
)

// FrameLen is the length of a frame of n values.
func FrameLen(n int) int { return FrameHeader + 2*n }

// Scale is the exponent e an FP16 frame of src uses: m·2^e in [2^14,
// 2^15) for the largest finite magnitude m, 0 when src has no non-zero
// finite value.
func Scale(src []float32) int {
	var m uint32 // the largest finite magnitude's bits: they order as the magnitudes do
	for _, v := range src {
		if a := math.Float32bits(v) &^ (1 << 31); a > m && a < 0x7f800000 {
			m = a
		}
	}
	if m == 0 {
		return 0
	}
	_, k := math.Frexp(float64(math.Float32frombits(m)))
	return 15 - k
}

// AppendFrame appends src's frame in format f (BF16 or FP16) to dst.
func AppendFrame(dst []byte, f Format, src []float32) []byte {
	e := 0
	if f == FP16 {
		e = Scale(src)
	}
	n := len(dst)
	dst = slices.Grow(dst, FrameLen(len(src)))[:n+FrameLen(len(src))]
	b := dst[n:]
	b[0], b[1] = byte(f), 0
	binary.LittleEndian.PutUint16(b[2:], uint16(int16(e)))
	vals := b[FrameHeader:]
	out := words(vals)
	if out == nil {
		out = make([]uint16, len(src))
		defer func() {
			for i, h := range out {
				binary.LittleEndian.PutUint16(vals[2*i:], h)
			}
		}()
	}
	out = out[:len(src)]
	switch f {
	case BF16:
		for i, v := range src {
			out[i] = BF16FromFloat32(v)
		}
	case FP16:
		if e <= 127 {
			// 2^e is a float32, and one float32 product rounds as the
			// exact product would: the same bits as the float64 path.
			s := float32(math.Ldexp(1, e))
			for i, v := range src {
				out[i] = FP16FromFloat32(float32(v * s))
			}
			break
		}
		s := math.Ldexp(1, e)
		for i, v := range src {
			out[i] = FP16FromFloat32(float32(float64(v) * s))
		}
	default:
		panic(fmt.Sprintf("half: a frame of %s: only bf16 and fp16 travel in frames", f))
	}
	return dst
}

// littleEndian says whether this host stores a uint16 as the wire does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// words views b as uint16s when this host is little-endian and b is
// 2-aligned (a frame in a pooled receive buffer, or one AppendFrame
// wrote at an even offset), so the loops load and store whole values;
// nil otherwise, and the callers go through encoding/binary.
func words(b []byte) []uint16 {
	if len(b) < 2 || !littleEndian || uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// header checks frame b's header against format f and count values, and
// returns the scale exponent and the values' bytes.
func header(b []byte, f Format, count int) (int, []byte, error) {
	if !f.Half() {
		return 0, nil, fmt.Errorf("half: a frame of %s: only bf16 and fp16 travel in frames", f)
	}
	if len(b) < FrameHeader {
		return 0, nil, fmt.Errorf("half: a %d-byte frame is shorter than its %d-byte header: the peer sent a damaged or foreign frame", len(b), FrameHeader)
	}
	if got := Format(b[0]); got != f || b[1] != 0 {
		return 0, nil, fmt.Errorf("half: frame of %s (reserved byte %d) where %s was expected: the peers must share --wire", got, b[1], f)
	}
	if want := FrameLen(count); len(b) != want {
		return 0, nil, fmt.Errorf("half: %s frame of %d bytes for %d values: want %d", f, len(b), count, want)
	}
	e := int(int16(binary.LittleEndian.Uint16(b[2:])))
	switch {
	case f == BF16 && e != 0:
		return 0, nil, fmt.Errorf("half: bf16 frame with scale exponent %d: bf16 is never scaled", e)
	case e < MinScale || e > MaxScale:
		return 0, nil, fmt.Errorf("half: fp16 frame with scale exponent %d: want %d to %d", e, MinScale, MaxScale)
	}
	return e, b[FrameHeader:], nil
}

// DecodeFrame writes frame b's values (format f, len(dst) of them) into
// dst, as float32.
func DecodeFrame(b []byte, f Format, dst []float32) error {
	return decode(b, f, dst, false)
}

// AddFrame adds frame b's values (format f, len(dst) of them) to dst, in
// float32: dst[i] += value i.
func AddFrame(b []byte, f Format, dst []float32) error {
	return decode(b, f, dst, true)
}

func decode(b []byte, f Format, dst []float32, add bool) error {
	e, vals, err := header(b, f, len(dst))
	if err != nil {
		return err
	}
	in := words(vals)
	if in == nil && len(dst) > 0 {
		in = make([]uint16, len(dst))
		for i := range in {
			in[i] = binary.LittleEndian.Uint16(vals[2*i:])
		}
	}
	in = in[:len(dst)]
	switch {
	case f == BF16 && add:
		for i, h := range in {
			dst[i] += BF16ToFloat32(h)
		}
	case f == BF16:
		for i, h := range in {
			dst[i] = BF16ToFloat32(h)
		}
	case e >= 0 && e <= 149:
		// 2^-e is a float32 and the product cannot overflow: one float32
		// product rounds as the exact one would (see scaleBack).
		s := float32(math.Ldexp(1, -e))
		if add {
			for i, h := range in {
				dst[i] += float32(FP16ToFloat32(h) * s)
			}
			break
		}
		for i, h := range in {
			dst[i] = float32(FP16ToFloat32(h) * s)
		}
	default:
		s := math.Ldexp(1, -e)
		for i, h := range in {
			v := scaleBack(FP16ToFloat32(h), s)
			if add {
				dst[i] += v
			} else {
				dst[i] = v
			}
		}
	}
	return nil
}

// scaleBack is v·s in float32. A finite value that rounded up to 2^15 at
// the top of float32's range (a magnitude within 2^-12 of 2^128) would
// come back as Inf: it saturates at float32's largest instead, so a
// finite gradient stays finite.
func scaleBack(v float32, s float64) float32 {
	x := float32(float64(v) * s)
	if math.IsInf(float64(x), 0) && !math.IsInf(float64(v), 0) {
		return float32(math.Copysign(math.MaxFloat32, float64(v)))
	}
	return x
}

// Round replaces every value of v by what it becomes after a trip in
// format f, in frames of at most chunk values (the scale of an FP16 frame
// depends on its chunk): what a replica alone applies, having nobody to
// send to. FP32 leaves v as it is.
func Round(f Format, v []float32, chunk int) {
	if !f.Half() {
		return
	}
	chunk = max(chunk, 1)
	var buf []byte
	for lo := 0; lo < len(v); lo += chunk {
		part := v[lo:min(lo+chunk, len(v))]
		buf = AppendFrame(buf[:0], f, part)
		if err := DecodeFrame(buf, f, part); err != nil {
			panic(err) // a frame just encoded for part always decodes
		}
	}
}
