package sparse

import (
	"fmt"
	"math"
	"unsafe"
)

// Exchange is how peers combine their gradients in a synchronous step.
type Exchange int

const (
	// ExchangeAuto picks sparse or dense per step from the measured density
	// (see ChooseExchange).
	ExchangeAuto Exchange = iota
	// ExchangeSparse all-gathers every peer's (index, value) pairs and
	// coalesces the union (Coalescer.MergeGradients).
	ExchangeSparse
	// ExchangeDense all-reduces the full D-float gradient, as the system
	// meshtrain replaces did; it exists to reproduce that bottleneck and for
	// gradients dense enough that pairs cost more than the vector.
	ExchangeDense
)

// ParseExchange parses the --exchange flag: sparse, dense or auto.
func ParseExchange(s string) (Exchange, error) {
	switch s {
	case "auto":
		return ExchangeAuto, nil
	case "sparse":
		return ExchangeSparse, nil
	case "dense":
		return ExchangeDense, nil
	}
	return 0, fmt.Errorf("--exchange %q: want sparse, dense or auto", s)
}

func (e Exchange) String() string {
	switch e {
	case ExchangeAuto:
		return "auto"
	case ExchangeSparse:
		return "sparse"
	case ExchangeDense:
		return "dense"
	}
	return fmt.Sprintf("Exchange(%d)", int(e))
}

// RawPairBytes is the size of an (int32 index, float32 value) pair sent
// without compression.
const RawPairBytes = 8

// SparseExchangeBytes estimates the bytes each peer sends in a sparse
// all-gather among peers ranks, each contributing nnz pairs of bytesPerPair:
// its own pairs must reach the peers-1 others (directly or relayed around a
// ring, the total per peer is the same).
func SparseExchangeBytes(nnz, peers int, bytesPerPair float64) float64 {
	return float64(peers-1) * float64(nnz) * bytesPerPair
}

// DenseExchangeBytes is the bytes each peer sends in a ring all-reduce of a
// dim-float32 gradient: 2·(peers-1)/peers of the vector.
func DenseExchangeBytes(dim, peers int) float64 {
	return 2 * float64(peers-1) / float64(peers) * 4 * float64(dim)
}

// ChooseExchange resolves mode for one step: sparse and dense are returned
// as they are; auto returns whichever sends fewer bytes per peer given the
// local gradient's nnz and the measured bytes per pair. With 2 peers the
// break-even is nnz × bytesPerPair = 4·D, the dense gradient's size; with
// more peers the all-gather's cost grows with N while the ring all-reduce's
// stays below twice the vector, so sparse wins at proportionally lower
// density. One peer exchanges nothing and gets ExchangeSparse.
func ChooseExchange(mode Exchange, nnz, dim, peers int, bytesPerPair float64) Exchange {
	if mode != ExchangeAuto {
		return mode
	}
	if peers <= 1 {
		return ExchangeSparse
	}
	if SparseExchangeBytes(nnz, peers, bytesPerPair) <= DenseExchangeBytes(dim, peers) {
		return ExchangeSparse
	}
	return ExchangeDense
}

// DrainDense is the dense exchange's way back to a sparse update: given the
// all-reduced gradient sum over all peers (dim floats) and the number of
// examples behind it, it sets dst to the non-zero entries scaled to the
// mean, and leaves sum all zero bits, ready to take the next step's
// gradient. It reads sum once, skipping runs of zero words, and writes only
// the entries that were not +0 (-0 included, so the buffer is exactly as
// make returned it): clearing and scanning the buffer are one pass. sum is
// left untouched, and dst empty, when examples is not positive.
func DrainDense(dst *Vector, sum []float32, examples int) error {
	dst.Indices, dst.Values = dst.Indices[:0], dst.Values[:0]
	if examples <= 0 {
		return fmt.Errorf("sparse: dense gradient of %d examples: need at least one", examples)
	}
	scale := 1 / float64(examples)
	head := 0
	if uintptr(unsafe.Pointer(unsafe.SliceData(sum)))%8 != 0 {
		head = min(1, len(sum)) // align the word view below
	}
	drainRange(dst, sum[:head], 0, scale)
	rest := sum[head:]
	const block = 8 // words (16 floats, one cache line) tested at once
	var words []uint64
	if len(rest) >= 2*block {
		words = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(rest))), len(rest)/2)
	}
	w := 0
	for ; w+block <= len(words); w += block {
		b := words[w : w+block : w+block]
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			drainRange(dst, rest[2*w:2*w+2*block], head+2*w, scale)
		}
	}
	drainRange(dst, rest[2*w:], head+2*w, scale)
	return dst.Validate(len(sum))
}

// drainRange appends s's non-zero entries (at base+k) scaled by scale to
// dst and zeroes every entry whose bits are not zero.
func drainRange(dst *Vector, s []float32, base int, scale float64) {
	for k, x := range s {
		if math.Float32bits(x) == 0 {
			continue
		}
		if x != 0 {
			dst.Indices = append(dst.Indices, int32(base+k))
			dst.Values = append(dst.Values, float32(float64(x)*scale))
		}
		s[k] = 0
	}
}
