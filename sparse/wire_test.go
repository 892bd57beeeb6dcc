package sparse

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var got Vector
	for trial := 0; trial < 200; trial++ {
		dim := 1 + r.IntN(5000)
		v := randomVector(r, dim, r.Float64()*r.Float64())
		b := AppendVector([]byte{0xAA}, v)[1:] // appends, does not overwrite
		if len(b) != EncodedSize(v) {
			t.Fatalf("trial %d: encoded %d bytes, EncodedSize says %d", trial, len(b), EncodedSize(v))
		}
		if err := DecodeVector(&got, b, dim); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if got.Len() != v.Len() {
			t.Fatalf("trial %d: decoded %d pairs, want %d", trial, got.Len(), v.Len())
		}
		for k := range v.Indices {
			if got.Indices[k] != v.Indices[k] || got.Values[k] != v.Values[k] {
				t.Fatalf("trial %d: pair %d decoded as (%d, %v), want (%d, %v)", trial, k, got.Indices[k], got.Values[k], v.Indices[k], v.Values[k])
			}
		}
	}
	// The largest index and gap an int32 allows.
	v := Vector{Indices: []int32{0, math.MaxInt32 - 1}, Values: []float32{1, 2}}
	if err := DecodeVector(&got, AppendVector(nil, v), math.MaxInt32); err != nil || got.Indices[1] != math.MaxInt32-1 {
		t.Fatalf("extreme indices: %v, %+v", err, got)
	}
}

func TestDecodeVectorRejects(t *testing.T) {
	valid := AppendVector(nil, Vector{Indices: []int32{2, 300}, Values: []float32{1, -1}})
	nan := AppendVector(nil, Vector{Indices: []int32{2}, Values: []float32{1}})
	binary.LittleEndian.PutUint32(nan[len(nan)-4:], math.Float32bits(float32(math.NaN())))
	for _, tc := range []struct {
		name string
		b    []byte
		dim  int
		want string
	}{
		{"empty input", nil, 10, "truncated"},
		{"truncated values", valid[:len(valid)-1], 1000, "truncated"},
		{"truncated varint", []byte{2, 0x80}, 1000, "only 1 bytes follow"},
		{"trailing", append(append([]byte(nil), valid...), 0), 1000, "trailing"},
		{"index beyond dim", valid, 300, "leaves [0, 300)"},
		{"non-minimal count", []byte{0x80, 0x00}, 10, "non-minimal"},
		{"non-minimal gap", []byte{1, 0x81, 0x00, 0, 0, 0, 0}, 10, "non-minimal"},
		{"huge count", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 10, "claims"},
		{"overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 10, "overflows"},
		{"nan value", nan, 10, "not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v Vector
			err := DecodeVector(&v, tc.b, tc.dim)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeVector(% x): %v, want error containing %q", tc.b, err, tc.want)
			}
		})
	}
}

func FuzzDecodeVector(f *testing.F) {
	f.Add(AppendVector(nil, Vector{}), 10)
	f.Add(AppendVector(nil, Vector{Indices: []int32{0, 1, 200, 70000}, Values: []float32{1, -2, 0, 3.5}}), 100000)
	f.Add([]byte{0x80, 0x00}, 10)
	f.Add([]byte{3, 0, 0, 0}, 5)
	f.Fuzz(func(t *testing.T, b []byte, dim int) {
		if dim <= 0 || dim > math.MaxInt32 {
			dim = math.MaxInt32
		}
		var v Vector
		if err := DecodeVector(&v, b, dim); err != nil {
			return
		}
		if err := v.Validate(dim); err != nil {
			t.Fatalf("decoded an invalid vector: %v", err)
		}
		// The encoding is canonical: what decodes re-encodes to itself.
		if again := AppendVector(nil, v); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in  % x\n out % x", b, again)
		}
	})
}
