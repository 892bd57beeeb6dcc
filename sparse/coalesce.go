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

	// The merge's runs (every part in float64, each ending in a sentinel,
	// runs[k] where run k starts) and two outputs used alternately.
	runIdx []int32
	runVal []float64
	runs   []int
	outIdx [2][]int32
	outVal [2][]float64
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

// MergeEncoded is MergeGradients over parts as they arrive from the wire:
// encoded[r] is rank r's gradient sum in AppendVector's encoding, except
// encoded[self], which is ignored in favour of local, this rank's own sum
// (trusted: it must satisfy the Vector invariant, as LogReg.GradientSum's
// output does). Every other part is decoded straight into the merge,
// checked as DecodeVector checks it; a bad part is an error naming its rank.
// It returns the number of pairs over all parts. The result is bitwise that
// of DecodeVector on each part followed by MergeGradients.
func (c *Coalescer) MergeEncoded(dst *Vector, encoded [][]byte, self int, local Vector, dim, examples int) (pairs int, err error) {
	if examples <= 0 {
		return 0, fmt.Errorf("sparse: merging gradients of %d examples: need at least one", examples)
	}
	if self < 0 || self >= len(encoded) {
		return 0, fmt.Errorf("sparse: merging %d parts with own rank %d", len(encoded), self)
	}
	total := 0
	for r, b := range encoded {
		if r == self {
			total += local.Len()
			continue
		}
		n, _, err := wirePairs(b)
		if err != nil {
			return 0, fmt.Errorf("gradient from rank %d: %w", r, err)
		}
		total += int(n)
	}
	c.startRuns(total, len(encoded))
	for r, b := range encoded {
		if r == self {
			c.addRun(local)
			continue
		}
		start := len(c.runIdx)
		c.runIdx, c.runVal, err = decodeWire(c.runIdx, c.runVal, b, dim)
		if err != nil {
			return 0, fmt.Errorf("gradient from rank %d: %w", r, err)
		}
		c.endRun(start)
	}
	c.mergeRuns(dst, 1/float64(examples))
	return total, nil
}

// mergeRun is one sorted part of a merge, in float64, ending in a mergeEnd
// sentinel index (with a 0 value).
type mergeRun struct {
	idx []int32
	val []float64
}

// emptyRun pads a round with fewer than four parts (read only).
var emptyRun = mergeRun{idx: []int32{mergeEnd}, val: []float64{0}}

// startRuns empties the merge runs, with room for total pairs in parts
// runs and the outputs.
func (c *Coalescer) startRuns(total, parts int) {
	if need := total + parts + 1; cap(c.runIdx) < need {
		c.runIdx = make([]int32, 0, need+need/4)
		c.runVal = make([]float64, 0, need+need/4)
	}
	for o := range c.outIdx {
		if cap(c.outIdx[o]) < total+1 {
			c.outIdx[o] = make([]int32, total+1+total/4)
			c.outVal[o] = make([]float64, total+1+total/4)
		}
		c.outIdx[o], c.outVal[o] = c.outIdx[o][:cap(c.outIdx[o])], c.outVal[o][:cap(c.outVal[o])]
	}
	c.runIdx, c.runVal, c.runs = c.runIdx[:0], c.runVal[:0], c.runs[:0]
}

// addRun appends p as a run.
func (c *Coalescer) addRun(p Vector) {
	start := len(c.runIdx)
	c.runIdx = append(c.runIdx, p.Indices...)
	for _, v := range p.Values[:len(p.Indices)] {
		c.runVal = append(c.runVal, float64(v))
	}
	c.endRun(start)
}

// endRun closes the run whose pairs were appended from start on.
func (c *Coalescer) endRun(start int) {
	c.runIdx, c.runVal = append(c.runIdx, mergeEnd), append(c.runVal, 0)
	c.runs = append(c.runs, start)
}

// merge is MergeGradients without validation.
func (c *Coalescer) merge(dst *Vector, parts []Vector, scale float64) {
	total := 0
	for _, p := range parts {
		total += len(p.Indices)
	}
	c.startRuns(total, len(parts))
	for _, p := range parts {
		c.addRun(p)
	}
	c.mergeRuns(dst, scale)
}

// mergeRuns merges the runs four at a time with merge4, the first input of
// every later round being the previous round's output, so each index is
// still summed in rank order: ((p0 + p1 + p2 + p3) + p4 + p5 + p6) + ...;
// then scales the sums into dst.
func (c *Coalescer) mergeRuns(dst *Vector, scale float64) {
	run := func(k int) mergeRun {
		if k >= len(c.runs) {
			return emptyRun
		}
		end := len(c.runIdx)
		if k+1 < len(c.runs) {
			end = c.runs[k+1]
		}
		return mergeRun{idx: c.runIdx[c.runs[k]:end], val: c.runVal[c.runs[k]:end]}
	}
	var acc mergeRun
	o := 0
	for k := 0; k == 0 || k < len(c.runs); o ^= 1 {
		in := [4]mergeRun{acc}
		first := 1
		if k == 0 {
			first = 0
		}
		for j := first; j < 4; j++ {
			in[j] = run(k)
			k++
		}
		n := merge4(c.outIdx[o], c.outVal[o], in[0].idx, in[0].val, in[1].idx, in[1].val, in[2].idx, in[2].val, in[3].idx, in[3].val)
		acc = mergeRun{idx: c.outIdx[o][:n+1], val: c.outVal[o][:n+1]}
	}
	n := len(acc.idx) - 1
	dst.Indices = append(dst.Indices[:0], acc.idx[:n]...)
	dst.Values = dst.Values[:0]
	for _, v := range acc.val[:n] {
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
