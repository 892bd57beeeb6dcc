package sparse

import (
	"fmt"
	"math"
	"math/bits"
)

// Coalescer turns an unordered list of (index, value) pairs into a Vector,
// summing the values of duplicate indices. It sorts with a stable LSD radix
// sort over only as many index bits as the largest index needs, so the cost
// is linear in the number of pairs and independent of the dimension, and
// duplicates are summed in the order they were added: the same pairs in the
// same order always give bit-identical sums. The zero value is ready to use;
// a Coalescer is not safe for concurrent use and allocates only while its
// buffers grow.
type Coalescer struct {
	keys, tmp []uint64 // index in the high 32 bits, float32 bits in the low 32
	maxIndex  uint32
	count     [1 << radixBits]int32
}

// radixBits is the widest digit of the radix sort. 11 bits keeps the
// histogram (8 KB) in L1 while sorting 2^25-sized indices in 3 passes.
const radixBits = 11

// insertionCutoff is the size below which insertion sort beats the radix
// passes' histogram clearing.
const insertionCutoff = 48

// Reset empties the pending pairs.
func (c *Coalescer) Reset() {
	c.keys = c.keys[:0]
	c.maxIndex = 0
}

// Add appends one pair. The index must be non-negative (callers validate
// indices against the dimension first; a negative one panics).
func (c *Coalescer) Add(i int32, v float32) {
	if i < 0 {
		panic(fmt.Sprintf("sparse: Coalescer.Add with negative index %d", i))
	}
	if uint32(i) > c.maxIndex {
		c.maxIndex = uint32(i)
	}
	c.keys = append(c.keys, uint64(uint32(i))<<32|uint64(math.Float32bits(v)))
}

// AddVector appends all pairs of v, scaled by alpha.
func (c *Coalescer) AddVector(v Vector, alpha float32) {
	vals := v.Values[:len(v.Indices)]
	for k, i := range v.Indices {
		c.Add(i, alpha*vals[k])
	}
}

// Pending returns the number of pairs added since the last Reset.
func (c *Coalescer) Pending() int { return len(c.keys) }

// Sum writes the coalesced pending pairs into dst (reusing its storage),
// each sum multiplied by scale, and resets c. Sums are accumulated in
// float64 and rounded once.
func (c *Coalescer) Sum(dst *Vector, scale float64) {
	c.sort()
	dst.Indices, dst.Values = dst.Indices[:0], dst.Values[:0]
	keys := c.keys
	for k := 0; k < len(keys); {
		idx := uint32(keys[k] >> 32)
		s := float64(math.Float32frombits(uint32(keys[k])))
		k++
		for k < len(keys) && uint32(keys[k]>>32) == idx {
			s += float64(math.Float32frombits(uint32(keys[k])))
			k++
		}
		dst.Indices = append(dst.Indices, int32(idx))
		dst.Values = append(dst.Values, float32(s*scale))
	}
	c.Reset()
}

// Coalesce is Reset, Add for every pair of (idx, val), then Sum(dst, 1).
func (c *Coalescer) Coalesce(dst *Vector, idx []int32, val []float32) {
	if len(idx) != len(val) {
		panic(fmt.Sprintf("sparse: Coalesce with %d indices and %d values", len(idx), len(val)))
	}
	c.Reset()
	for k, i := range idx {
		c.Add(i, val[k])
	}
	c.Sum(dst, 1)
}

// sort orders c.keys by index, stably.
func (c *Coalescer) sort() {
	n := len(c.keys)
	if n < insertionCutoff {
		keys := c.keys
		for i := 1; i < n; i++ {
			k := keys[i]
			j := i
			for ; j > 0 && keys[j-1]>>32 > k>>32; j-- {
				keys[j] = keys[j-1]
			}
			keys[j] = k
		}
		return
	}
	width := bits.Len32(c.maxIndex)
	if width == 0 {
		return // every index is 0
	}
	passes := (width + radixBits - 1) / radixBits
	digit := (width + passes - 1) / passes
	mask := uint64(1)<<digit - 1
	if cap(c.tmp) < n {
		c.tmp = make([]uint64, n, cap(c.keys))
	}
	src, dst := c.keys, c.tmp[:n]
	count := c.count[:1<<digit]
	for p := 0; p < passes; p++ {
		shift := uint(32 + p*digit)
		clear(count)
		for _, k := range src {
			count[(k>>shift)&mask]++
		}
		var sum int32
		for d, n := range count {
			count[d] = sum
			sum += n
		}
		for _, k := range src {
			d := (k >> shift) & mask
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	// After an odd number of passes the sorted keys live in the scratch
	// buffer; swap the roles rather than copying back.
	c.keys, c.tmp = src, dst[:cap(dst)]
}

// MergeGradients is the merge step of a synchronous sparse exchange: given
// every rank's gradient sum in rank order (parts[r] from rank r, as a sparse
// all-gather returns them), it writes into dst their sum scaled by
// 1/examples, the number of examples behind all the parts together, so dst is
// the mean gradient of the union batch. Each part is validated against dim
// first; a bad part is an error naming its rank. Every peer that calls it
// with the same parts gets bit-identical output, because duplicates are
// summed in rank order.
func (c *Coalescer) MergeGradients(dst *Vector, parts []Vector, dim, examples int) error {
	if examples <= 0 {
		return fmt.Errorf("sparse: merging gradients of %d examples: need at least one", examples)
	}
	c.Reset()
	for r, p := range parts {
		if err := p.Validate(dim); err != nil {
			return fmt.Errorf("gradient from rank %d: %w", r, err)
		}
		c.AddVector(p, 1)
	}
	c.Sum(dst, 1/float64(examples))
	return nil
}
