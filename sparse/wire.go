package sparse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The wire encoding of a Vector, for exchanging gradients between peers:
//
//	uvarint n                         number of pairs
//	n × uvarint gap                   Indices[0], then Indices[k]-Indices[k-1]-1
//	n × float32 little-endian         Values, in index order
//
// Storing gaps minus one means every byte string that decodes is a valid
// strictly increasing index list, and a head-heavy (Zipf) gradient spends 1-3
// bytes per index instead of 4. Varints must be minimal, so the encoding is
// canonical: DecodeVector accepts exactly the outputs of AppendVector.

// wireMinBytesPerPair bounds n on decode, so a hostile count cannot make the
// decoder allocate more than the input could possibly hold.
const wireMinBytesPerPair = 5

// EncodedSize returns len(AppendVector(nil, v)).
func EncodedSize(v Vector) int {
	n := uvarintLen(uint64(len(v.Indices))) + 4*len(v.Values)
	prev := int64(-1)
	for _, i := range v.Indices {
		n += uvarintLen(uint64(int64(i) - prev - 1))
		prev = int64(i)
	}
	return n
}

// AppendVector appends the wire encoding of v to dst. v must satisfy the
// Vector invariant (AppendVector panics on decreasing indices rather than
// emit bytes no peer could decode).
func AppendVector(dst []byte, v Vector) []byte {
	if len(v.Indices) != len(v.Values) {
		panic(fmt.Sprintf("sparse: AppendVector with %d indices and %d values", len(v.Indices), len(v.Values)))
	}
	dst = binary.AppendUvarint(dst, uint64(len(v.Indices)))
	prev := int64(-1)
	for _, i := range v.Indices {
		gap := int64(i) - prev - 1
		if gap < 0 {
			panic(fmt.Sprintf("sparse: AppendVector: index %d after %d is not strictly increasing", i, prev))
		}
		dst = binary.AppendUvarint(dst, uint64(gap))
		prev = int64(i)
	}
	for _, x := range v.Values {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

// ErrWireTruncated reports a wire-encoded vector that ends early.
var ErrWireTruncated = errors.New("sparse: wire-encoded vector is truncated")

// DecodeVector decodes src, which must hold exactly one wire-encoded vector,
// into dst (reusing its storage). It checks every index against dim and every
// value for finiteness, so a decoded vector always satisfies the invariant.
func DecodeVector(dst *Vector, src []byte, dim int) error {
	var err error
	dst.Indices, dst.Values, err = decodeWire(dst.Indices[:0], dst.Values[:0], src, dim)
	return err
}

// wirePairs returns the pair count at the head of a wire-encoded vector,
// checked against the bytes that follow it.
func wirePairs(src []byte) (n uint64, off int, err error) {
	n, off, err = readUvarint(src, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("sparse: decoding pair count: %w", err)
	}
	if n > uint64(len(src)-off)/wireMinBytesPerPair {
		return 0, 0, fmt.Errorf("sparse: wire vector claims %d pairs but only %d bytes follow (each pair needs at least %d)", n, len(src)-off, wireMinBytesPerPair)
	}
	return n, off, nil
}

// decodeWire appends the pairs of the wire-encoded vector src to idx and
// val (float32 for a Vector, float64 for a merge run), checking every index
// against dim and every value for finiteness.
func decodeWire[F float32 | float64](idx []int32, val []F, src []byte, dim int) ([]int32, []F, error) {
	n, off, err := wirePairs(src)
	if err != nil {
		return idx, val, err
	}
	prev := int64(-1)
	for k := uint64(0); k < n; k++ {
		var gap uint64
		if off < len(src) && src[off] < 0x80 { // most gaps of a Zipf gradient fit one byte
			gap = uint64(src[off])
			off++
		} else if off+1 < len(src) && src[off+1]-1 < 0x7f { // two bytes, minimal (second byte 1..127)
			gap = uint64(src[off]&0x7f) | uint64(src[off+1])<<7
			off += 2
		} else if gap, off, err = readUvarint(src, off); err != nil {
			return idx, val, fmt.Errorf("sparse: decoding index %d of %d: %w", k, n, err)
		}
		i := prev + 1 + int64(gap)
		if gap >= uint64(dim) || i >= int64(dim) {
			return idx, val, fmt.Errorf("sparse: decoded pair %d: gap %d after index %d leaves [0, %d)", k, gap, prev, dim)
		}
		idx = append(idx, int32(i))
		prev = i
	}
	if uint64(len(src)-off) != 4*n {
		if uint64(len(src)-off) < 4*n {
			return idx, val, fmt.Errorf("sparse: %d values need %d bytes, %d remain: %w", n, 4*n, len(src)-off, ErrWireTruncated)
		}
		return idx, val, fmt.Errorf("sparse: %d trailing bytes after a wire vector of %d pairs", uint64(len(src)-off)-4*n, n)
	}
	first := len(idx) - int(n)
	for k := range int(n) {
		bits := binary.LittleEndian.Uint32(src[off:])
		if bits&0x7f800000 == 0x7f800000 { // exponent all ones: Inf or NaN
			x := math.Float32frombits(bits)
			return idx, val, fmt.Errorf("sparse: decoded value %v at index %d is not finite", x, idx[first+k])
		}
		val = append(val, F(math.Float32frombits(bits)))
		off += 4
	}
	return idx, val, nil
}

// readUvarint reads a minimal uvarint of at most 64 bits at src[off:].
func readUvarint(src []byte, off int) (uint64, int, error) {
	var x uint64
	for s, k := uint(0), off; k < len(src); s, k = s+7, k+1 {
		b := src[k]
		if s == 63 && b > 1 {
			return 0, off, errors.New("sparse: varint overflows 64 bits")
		}
		x |= uint64(b&0x7f) << s
		if b < 0x80 {
			if b == 0 && k > off {
				return 0, off, errors.New("sparse: non-minimal varint")
			}
			return x, k + 1, nil
		}
	}
	return 0, off, ErrWireTruncated
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
