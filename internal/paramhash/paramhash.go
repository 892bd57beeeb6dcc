// Package paramhash hashes a model's parameters: the SHA-256 of a float32
// vector as its little-endian bytes, the hash the replicas compare to
// prove they are bitwise identical and a summary records. It moved out
// of package mirrored's root (which is at its size ceiling) unchanged.
package paramhash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"unsafe"
)

// Hex is Sum in hex.
func Hex(params []float32) string {
	sum := Sum(params)
	return hex.EncodeToString(sum[:])
}

// Sum is the SHA-256 of params as little-endian float32 bytes: on a
// little-endian host the vector's own memory (faster than through a
// conversion buffer: BENCHMARKS.md, "Figures behind the code": hashing the
// parameters), elsewhere through a small buffer rather than one copy of
// the whole vector.
func Sum(params []float32) [32]byte {
	if littleEndian {
		return sha256.Sum256(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(params))), 4*len(params)))
	}
	h := sha256.New()
	var b [4096]byte
	for len(params) > 0 {
		n := min(len(params), len(b)/4)
		for i, v := range params[:n] {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		h.Write(b[:4*n])
		params = params[n:]
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// littleEndian is whether float32s sit in memory as their little-endian
// bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
