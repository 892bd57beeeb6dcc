package data

import (
	"encoding/binary"
	"fmt"
	"math"
)

// IDX element types (the third byte of an IDX file's magic number).
const (
	IDXUint8   byte = 0x08
	IDXInt8    byte = 0x09
	IDXInt16   byte = 0x0B
	IDXInt32   byte = 0x0C
	IDXFloat32 byte = 0x0D
	IDXFloat64 byte = 0x0E
)

// maxIDXDims bounds the dimension count a header may claim; real files use
// 1 (labels) or 3 (images), and a corrupt byte must not make us trust 255.
const maxIDXDims = 8

// maxIDXBytes bounds the payload a header may claim (1 GiB), so a corrupt
// header is reported rather than trusted.
const maxIDXBytes = 1 << 30

// IDX is a parsed IDX file (the format of the MNIST files): a typed,
// big-endian, row-major array. Data aliases the parsed input; it holds
// exactly ElemSize(Type)*product(Dims) bytes.
type IDX struct {
	Type byte
	Dims []int
	Data []byte
}

// idxElemSize returns the size in bytes of an IDX element type, or 0 if the
// type is unknown.
func idxElemSize(t byte) int {
	switch t {
	case IDXUint8, IDXInt8:
		return 1
	case IDXInt16:
		return 2
	case IDXInt32, IDXFloat32:
		return 4
	case IDXFloat64:
		return 8
	}
	return 0
}

// ParseIDX parses an IDX file held in b. name is used in errors, which give
// the byte offset of the first problem: a bad magic number, an unknown
// element type, a zero or implausible dimension, a file shorter than its
// header promises (truncated) or longer (trailing bytes).
func ParseIDX(name string, b []byte) (*IDX, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%s: truncated IDX header at byte offset %d: want 4 bytes of magic number", name, len(b))
	}
	if b[0] != 0 || b[1] != 0 {
		return nil, fmt.Errorf("%s: bad IDX magic number %#02x%02x%02x%02x at byte offset 0: the first two bytes must be zero (not an IDX file, or still compressed?)", name, b[0], b[1], b[2], b[3])
	}
	t := b[2]
	size := idxElemSize(t)
	if size == 0 {
		return nil, fmt.Errorf("%s: unknown IDX element type %#02x at byte offset 2", name, t)
	}
	nd := int(b[3])
	if nd == 0 || nd > maxIDXDims {
		return nil, fmt.Errorf("%s: IDX dimension count %d at byte offset 3: want 1..%d", name, nd, maxIDXDims)
	}
	hdr := 4 + 4*nd
	if len(b) < hdr {
		return nil, fmt.Errorf("%s: truncated IDX header at byte offset %d: want %d header bytes for %d dimensions", name, len(b), hdr, nd)
	}
	dims := make([]int, nd)
	total := int64(size)
	for i := range dims {
		d := binary.BigEndian.Uint32(b[4+4*i:])
		if d == 0 {
			return nil, fmt.Errorf("%s: IDX dimension %d is zero at byte offset %d", name, i, 4+4*i)
		}
		if total > maxIDXBytes/int64(d) {
			return nil, fmt.Errorf("%s: IDX dimensions at byte offset 4 claim more than %d bytes of data: corrupt header", name, int64(maxIDXBytes))
		}
		total *= int64(d)
		dims[i] = int(d)
	}
	want := int64(hdr) + total
	switch {
	case int64(len(b)) < want:
		return nil, fmt.Errorf("%s: truncated: file ends at byte offset %d, but its header (dims %v) needs %d bytes", name, len(b), dims, want)
	case int64(len(b)) > want:
		return nil, fmt.Errorf("%s: %d trailing bytes from byte offset %d after the data its header (dims %v) describes: corrupt file", name, int64(len(b))-want, want, dims)
	}
	return &IDX{Type: t, Dims: dims, Data: b[hdr:want]}, nil
}

// headerLen is the byte offset of the first data byte.
func (x *IDX) headerLen() int { return 4 + 4*len(x.Dims) }

// Float32s decodes a float32 IDX array (big-endian) into a new slice.
func (x *IDX) Float32s() ([]float32, error) {
	if x.Type != IDXFloat32 {
		return nil, fmt.Errorf("IDX element type %#02x is not float32 (%#02x)", x.Type, IDXFloat32)
	}
	out := make([]float32, len(x.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.BigEndian.Uint32(x.Data[4*i:]))
	}
	return out, nil
}

// EncodeIDX returns the IDX file holding payload (elements of type typ,
// big-endian, row-major) with dimensions dims: the inverse of ParseIDX.
func EncodeIDX(typ byte, dims []int, payload []byte) []byte {
	b := make([]byte, 4, 4+4*len(dims)+len(payload))
	b[2], b[3] = typ, byte(len(dims))
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, payload...)
}
