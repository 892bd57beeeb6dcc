package sparse

import (
	"fmt"
	"math"
	"math/bits"
)

// Coalescer turns an unordered list of (index, value) pairs into a Vector,
// summing the values of duplicate indices. It first folds duplicates
// together in a small open-addressing hash table (sized to the number of
// pairs, so it stays in cache whatever the dimension), then sorts only the
// unique indices with an LSD radix sort over as many bits as the largest
// index needs. Both steps are linear in the number of pairs. Duplicates are
// summed in float64 in the order they were added: the same pairs in the same
// order always give bit-identical sums. The zero value is ready to use; a
// Coalescer is not safe for concurrent use and allocates only while its
// buffers grow.
type Coalescer struct {
	keys     []uint64 // pending pairs: index in the high 32 bits, float32 bits in the low 32
	maxIndex uint32

	table []int32               // hash slot -> position in uniq + 1; 0 is empty
	uniq  []uint64              // unique index << 32 | its position in sums
	sums  []float64             // per unique index, in order of first appearance
	tmp   []uint64              // radix sort scratch
	count [3 << radixBits]int32 // one histogram per pass (at most 3 for 31-bit indices)

	// MergeGradients\' ping-pong accumulators.
	mergeIdx [2][]int32
	mergeVal [2][]float64
}

// radixBits is the widest digit of the radix sort. 11 bits keeps a
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
	c.fold()
	uniq := radixSort(c.uniq, &c.tmp, c.maxIndex, &c.count)
	dst.Indices, dst.Values = dst.Indices[:0], dst.Values[:0]
	for _, u := range uniq {
		dst.Indices = append(dst.Indices, int32(u>>32))
		dst.Values = append(dst.Values, float32(c.sums[uint32(u)]*scale))
	}
	c.Reset()
}

// fold sums the pending pairs per index into c.uniq / c.sums.
func (c *Coalescer) fold() {
	n := len(c.keys)
	size := 1 << bits.Len(uint(2*n)) // load factor <= 1/2
	if cap(c.table) < size {
		c.table = make([]int32, size)
	}
	table := c.table[:size]
	clear(table)
	mask := uint32(size - 1)
	shift := uint(32 - bits.Len(uint(size-1)))
	uniq, sums := c.uniq[:0], c.sums[:0]
	for _, k := range c.keys {
		idx := uint32(k >> 32)
		v := float64(math.Float32frombits(uint32(k)))
		// Fibonacci hashing (the top bits of idx·2^32/φ): consecutive
		// indices land far apart.
		h := (idx * 0x9e3779b1) >> shift
		for {
			p := table[h]
			if p == 0 {
				table[h] = int32(len(uniq) + 1)
				uniq = append(uniq, uint64(idx)<<32|uint64(len(sums)))
				sums = append(sums, v)
				break
			}
			if uint32(uniq[p-1]>>32) == idx {
				sums[p-1] += v
				break
			}
			h = (h + 1) & mask
		}
	}
	c.uniq, c.sums = uniq, sums
}

// radixSort sorts keys by their high 32 bits (at most maxIndex) and returns
// the sorted slice, which is keys or *tmp.
func radixSort(keys []uint64, tmp *[]uint64, maxIndex uint32, count *[3 << radixBits]int32) []uint64 {
	n := len(keys)
	if n < insertionCutoff {
		for i := 1; i < n; i++ {
			k := keys[i]
			j := i
			for ; j > 0 && keys[j-1]>>32 > k>>32; j-- {
				keys[j] = keys[j-1]
			}
			keys[j] = k
		}
		return keys
	}
	width := bits.Len32(maxIndex)
	if width == 0 {
		return keys // every index is 0
	}
	passes := (width + radixBits - 1) / radixBits
	digit := (width + passes - 1) / passes
	mask := uint64(1)<<digit - 1
	if cap(*tmp) < n {
		*tmp = make([]uint64, n, cap(keys))
	}
	src, dst := keys, (*tmp)[:n]
	// One read of the keys builds every pass's histogram.
	hist := count[:passes<<digit]
	clear(hist)
	for _, k := range src {
		idx := k >> 32
		for p := 0; p < passes; p++ {
			hist[p<<digit+int((idx>>(p*digit))&mask)]++
		}
	}
	for p := 0; p < passes; p++ {
		count := hist[p<<digit : (p+1)<<digit]
		var sum int32
		for d, n := range count {
			count[d] = sum
			sum += n
		}
		shift := uint(32 + p*digit)
		for _, k := range src {
			d := (k >> shift) & mask
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	return src
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

// MergeGradients is the merge step of a synchronous sparse exchange: given
// every rank's gradient sum in rank order (parts[r] from rank r, as a sparse
// all-gather returns them), it writes into dst their sum scaled by
// 1/examples, the number of examples behind all the parts together, so dst is
// the mean gradient of the union batch. Each part is validated against dim
// first; a bad part is an error naming its rank. Because the parts are
// sorted it merges them (linear time, no sort), summing in float64 in rank
// order, so every peer that calls it with the same parts gets bit-identical
// output.
func (c *Coalescer) MergeGradients(dst *Vector, parts []Vector, dim, examples int) error {
	if examples <= 0 {
		return fmt.Errorf("sparse: merging gradients of %d examples: need at least one", examples)
	}
	for r, p := range parts {
		if err := p.Validate(dim); err != nil {
			return fmt.Errorf("gradient from rank %d: %w", r, err)
		}
	}
	// acc accumulates parts[0] + ... + parts[r] in float64; merging one
	// part at a time keeps the rank order of every sum.
	accIdx, accVal := c.mergeIdx[0][:0], c.mergeVal[0][:0]
	outIdx, outVal := c.mergeIdx[1][:0], c.mergeVal[1][:0]
	if len(parts) > 0 {
		accIdx = append(accIdx, parts[0].Indices...)
		for _, v := range parts[0].Values {
			accVal = append(accVal, float64(v))
		}
	}
	for _, p := range parts[min(1, len(parts)):] {
		outIdx, outVal = outIdx[:0], outVal[:0]
		pv := p.Values[:len(p.Indices)]
		a, b := 0, 0
		for a < len(accIdx) && b < len(p.Indices) {
			switch ia, ib := accIdx[a], p.Indices[b]; {
			case ia < ib:
				outIdx, outVal = append(outIdx, ia), append(outVal, accVal[a])
				a++
			case ia > ib:
				outIdx, outVal = append(outIdx, ib), append(outVal, float64(pv[b]))
				b++
			default:
				outIdx, outVal = append(outIdx, ia), append(outVal, accVal[a]+float64(pv[b]))
				a++
				b++
			}
		}
		outIdx, outVal = append(outIdx, accIdx[a:]...), append(outVal, accVal[a:]...)
		for ; b < len(p.Indices); b++ {
			outIdx, outVal = append(outIdx, p.Indices[b]), append(outVal, float64(pv[b]))
		}
		accIdx, outIdx = outIdx, accIdx
		accVal, outVal = outVal, accVal
	}
	c.mergeIdx[0], c.mergeVal[0] = accIdx, accVal
	c.mergeIdx[1], c.mergeVal[1] = outIdx, outVal
	scale := 1 / float64(examples)
	dst.Indices = append(dst.Indices[:0], accIdx...)
	dst.Values = dst.Values[:0]
	for _, v := range accVal {
		dst.Values = append(dst.Values, float32(v*scale))
	}
	return nil
}
