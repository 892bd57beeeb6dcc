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

	// MergeGradients' padded copies of the parts and per-part cursors.
	mergeIdx  []int32
	mergeVal  []float64
	mergePos  []int
	mergeHead []int32
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
// sorted it merges them in one pass (linear time, no sort), summing each
// index's values in float64 in rank order, so every peer that calls it with
// the same parts gets bit-identical output.
func (c *Coalescer) MergeGradients(dst *Vector, parts []Vector, dim, examples int) error {
	if examples <= 0 {
		return fmt.Errorf("sparse: merging gradients of %d examples: need at least one", examples)
	}
	for r, p := range parts {
		if err := p.Validate(dim); err != nil {
			return fmt.Errorf("gradient from rank %d: %w", r, err)
		}
	}
	c.merge(dst, parts, 1/float64(examples))
	return nil
}

// mergeEnd is the sentinel index after the last pair of a padded part: above
// every valid index (at most MaxInt32-1), so the minimum reaches it only when
// every part is exhausted.
const mergeEnd = math.MaxInt32

// merge is MergeGradients without validation. Each part is copied into a
// padded float64 run ending in a mergeEnd sentinel; runs are then merged
// four at a time by merge4, the first input of every later round being the
// previous round's output, so each index is still summed in rank order:
// ((p0 + p1 + p2 + p3) + p4 + p5 + p6) + ...
func (c *Coalescer) merge(dst *Vector, parts []Vector, scale float64) {
	total := 0
	for _, p := range parts {
		total += len(p.Indices)
	}
	// Every part padded, one empty run, two outputs of total+1 each.
	need := total + len(parts) + 1 + 2*(total+1)
	if cap(c.mergeIdx) < need {
		c.mergeIdx = make([]int32, 0, need+need/4)
		c.mergeVal = make([]float64, 0, need+need/4)
	}
	idx, val := c.mergeIdx[:0], c.mergeVal[:0]
	run := func(p Vector) ([]int32, []float64) {
		start := len(idx)
		idx = append(idx, p.Indices...)
		idx = append(idx, mergeEnd)
		for _, v := range p.Values[:len(p.Indices)] {
			val = append(val, float64(v))
		}
		val = append(val, 0)
		return idx[start:len(idx):len(idx)], val[start:len(val):len(val)]
	}
	empty := func() ([]int32, []float64) { return run(Vector{}) }
	// Two output runs of total+1, used alternately.
	outStart := len(idx)
	idx, val = idx[:outStart+2*(total+1)], val[:outStart+2*(total+1)]
	outs := [2]struct {
		idx []int32
		val []float64
	}{
		{idx[outStart : outStart+total+1], val[outStart : outStart+total+1]},
		{idx[outStart+total+1 : outStart+2*(total+1)], val[outStart+total+1 : outStart+2*(total+1)]},
	}
	ei, ev := empty()
	var ins [4]struct {
		idx []int32
		val []float64
	}
	rest := parts
	first := true
	o := 0
	var accIdx []int32
	var accVal []float64
	for first || len(rest) > 0 {
		k := 0
		if !first {
			ins[0].idx, ins[0].val = accIdx, accVal
			k = 1
		}
		for ; k < 4; k++ {
			if len(rest) > 0 {
				ins[k].idx, ins[k].val = run(rest[0])
				rest = rest[1:]
			} else {
				ins[k].idx, ins[k].val = ei, ev
			}
		}
		n := merge4(outs[o].idx, outs[o].val, ins[0].idx, ins[0].val, ins[1].idx, ins[1].val, ins[2].idx, ins[2].val, ins[3].idx, ins[3].val)
		accIdx, accVal = outs[o].idx[:n+1], outs[o].val[:n+1]
		o ^= 1
		first = false
	}
	c.mergeIdx, c.mergeVal = idx, val
	n := len(accIdx) - 1
	dst.Indices = append(dst.Indices[:0], accIdx[:n]...)
	dst.Values = dst.Values[:0]
	for _, v := range accVal[:n] {
		dst.Values = append(dst.Values, float32(v*scale))
	}
}

// merge4 merges four sentinel-terminated sorted runs into out (which must
// hold the union plus its sentinel), summing each index's values in the
// order a, b, c, d, and returns the number of indices written (the sentinel
// follows them). The loop is branch-free apart from its exit: which runs
// hold an index is random, so a branch there would mispredict about once
// per output. -0 is the identity of IEEE addition (-0 + x == x for every x,
// signed zeros included), so starting each sum from it adds exactly as
// starting from the first run holding the index.
func merge4(outIdx []int32, outVal []float64, ai []int32, av []float64, bi []int32, bv []float64, ci []int32, cv []float64, di []int32, dv []float64) int {
	var pa, pb, pc, pd int
	ha, hb, hc, hd := ai[0], bi[0], ci[0], di[0]
	negZero := math.Copysign(0, -1)
	n := 0
	for {
		m := min(min(ha, hb), min(hc, hd))
		if m == mergeEnd {
			break
		}
		acc := negZero
		acc += pick(ha == m, av[pa])
		acc += pick(hb == m, bv[pb])
		acc += pick(hc == m, cv[pc])
		acc += pick(hd == m, dv[pd])
		pa += b2i(ha == m)
		pb += b2i(hb == m)
		pc += b2i(hc == m)
		pd += b2i(hd == m)
		ha, hb, hc, hd = ai[pa], bi[pb], ci[pc], di[pd]
		outIdx[n], outVal[n] = m, acc
		n++
	}
	outIdx[n], outVal[n] = mergeEnd, 0
	return n
}

// pick returns x if ok, else -0 (which adds as nothing), without a branch.
func pick(ok bool, x float64) float64 {
	bits := math.Float64bits(x)
	mask := -uint64(b2i(ok))
	return math.Float64frombits(bits&mask | (1<<63)&^mask)
}

func b2i(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}
