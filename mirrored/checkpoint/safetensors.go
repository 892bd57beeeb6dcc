package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The safetensors format (https://huggingface.co/docs/safetensors), which
// Python reads with safetensors.numpy.load_file or safetensors.torch:
//
//	8 bytes   N, the header length, unsigned little-endian
//	N bytes   JSON header: {"<tensor>": {"dtype": "F32", "shape": [..],
//	          "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
//	          padded with spaces to a multiple of 8
//	rest      the tensors' bytes, little-endian, row-major; offsets are
//	          relative to the start of this section, and the tensors tile it
//	          exactly (no gaps, no overlaps)

// maxHeaderBytes bounds the JSON header before it is read; the reference
// implementation uses the same 100 MB limit.
const maxHeaderBytes = 100 << 20

// dtypeSizes are the safetensors dtypes and their element sizes.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// Tensor is one entry of a safetensors file.
type Tensor struct {
	DType string
	Shape []int
	Data  []byte // little-endian elements; a view into the file's bytes
}

// Float32s returns the tensor's elements; it fails unless DType is F32.
func (t Tensor) Float32s() ([]float32, error) {
	if t.DType != "F32" {
		return nil, fmt.Errorf("dtype %s: want F32", t.DType)
	}
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// F32Tensor wraps a float32 vector as a one-dimensional F32 tensor.
func F32Tensor(v []float32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{DType: "F32", Shape: []int{len(v)}, Data: b}
}

type tensorHeader struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// EncodeSafetensors returns the file bytes for tensors (stored in name
// order) and metadata.
func EncodeSafetensors(tensors map[string]Tensor, meta map[string]string) ([]byte, error) {
	head, names, size, err := encodeHeader(tensors, meta)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+int(size))
	out = append(out, head...)
	for _, name := range names {
		out = append(out, tensors[name].Data...)
	}
	return out, nil
}

// encodeHeader returns the file's bytes up to the data section (the length
// and the padded JSON header), the tensor names in storage order and the
// data section's size. It is the one encoding of a header, so a decoder
// can check that a file's header is byte for byte what it would write.
func encodeHeader(tensors map[string]Tensor, meta map[string]string) ([]byte, []string, int64, error) {
	names := slices.Sorted(maps.Keys(tensors))
	hdr := map[string]any{}
	if len(meta) > 0 {
		hdr["__metadata__"] = meta
	}
	var off int64
	for _, name := range names {
		t := tensors[name]
		if name == "__metadata__" {
			return nil, nil, 0, fmt.Errorf("safetensors: tensor name %q is reserved", name)
		}
		if err := checkShape(t.DType, t.Shape, int64(len(t.Data))); err != nil {
			return nil, nil, 0, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		hdr[name] = tensorHeader{DType: t.DType, Shape: t.Shape, DataOffsets: []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("safetensors: encoding the header: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	out := make([]byte, 8, 8+len(js))
	binary.LittleEndian.PutUint64(out, uint64(len(js)))
	return append(out, js...), names, off, nil
}

// checkShape checks that dtype is known and shape describes exactly n bytes.
func checkShape(dtype string, shape []int, n int64) error {
	size, ok := dtypeSizes[dtype]
	if !ok {
		return fmt.Errorf("unknown dtype %q", dtype)
	}
	elems, err := elements(shape, size)
	if err != nil {
		return err
	}
	if elems*int64(size) != n {
		return fmt.Errorf("shape %v of %s is %d bytes but the data are %d bytes", shape, dtype, elems*int64(size), n)
	}
	return nil
}

// elements is the number of elements of shape, checked to be no negative
// dimension and to fit in an int64 at size bytes each.
func elements(shape []int, size int) (int64, error) {
	elems := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && elems > math.MaxInt64/int64(size)/int64(d) {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		elems *= int64(d)
	}
	return elems, nil
}

// DecodeSafetensors parses and validates a whole safetensors file held in
// b: the header length against the file size, the header's JSON, every
// dtype and shape against its byte range, and that the ranges tile the data
// section. Tensor data are views into b.
func DecodeSafetensors(b []byte) (map[string]Tensor, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("safetensors: %d bytes: too short for the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeaderBytes {
		return nil, nil, fmt.Errorf("safetensors: header length %d exceeds the %d-byte limit: not a safetensors file, or corrupt", n, maxHeaderBytes)
	}
	if n > uint64(len(b)-8) {
		return nil, nil, fmt.Errorf("safetensors: header length %d runs past the end of the %d-byte file: truncated or corrupt", n, len(b))
	}
	hb := b[8 : 8+n]
	if len(hb) == 0 || hb[0] != '{' {
		return nil, nil, errors.New("safetensors: header does not start with '{': not a safetensors file, or corrupt")
	}
	data := b[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hb, &raw); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header JSON: %w", err)
	}
	var meta map[string]string
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	tensors := map[string]Tensor{}
	for name, js := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(js, &meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var th tensorHeader
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&th); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: header entry: %w", name, err)
		}
		if len(th.DataOffsets) != 2 || th.DataOffsets[0] < 0 || th.DataOffsets[1] < th.DataOffsets[0] || th.DataOffsets[1] > int64(len(data)) {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: data_offsets %v: want [begin, end] with 0 ≤ begin ≤ end ≤ %d (the data section)", name, th.DataOffsets, len(data))
		}
		if err := checkShape(th.DType, th.Shape, th.DataOffsets[1]-th.DataOffsets[0]); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		spans = append(spans, span{name, th.DataOffsets[0], th.DataOffsets[1]})
		tensors[name] = Tensor{DType: th.DType, Shape: slices.Clone(th.Shape), Data: data[th.DataOffsets[0]:th.DataOffsets[1]]}
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.begin != b.begin {
			return int(a.begin - b.begin)
		}
		return strings.Compare(a.name, b.name)
	})
	var at int64
	for _, s := range spans {
		if s.begin != at {
			return nil, nil, fmt.Errorf("safetensors: tensor %q starts at byte %d of the data section but the previous tensor ends at %d: tensors must tile the data without gaps or overlaps", s.name, s.begin, at)
		}
		at = s.end
	}
	if at != int64(len(data)) {
		return nil, nil, fmt.Errorf("safetensors: tensors cover %d bytes but the data section has %d: trailing bytes", at, len(data))
	}
	return tensors, meta, nil
}
