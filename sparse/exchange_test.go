package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseExchange(t *testing.T) {
	for _, s := range []string{"auto", "sparse", "dense"} {
		e, err := ParseExchange(s)
		if err != nil || e.String() != s {
			t.Fatalf("ParseExchange(%q) = %v, %v", s, e, err)
		}
	}
	if _, err := ParseExchange("Sparse"); err == nil {
		t.Fatal("ParseExchange accepted Sparse")
	}
}

func TestChooseExchange(t *testing.T) {
	const dim = 1000 // dense gradient: 4000 bytes
	for _, tc := range []struct {
		mode       Exchange
		nnz, peers int
		bpp        float64
		want       Exchange
	}{
		{ExchangeSparse, 1000, 2, 8, ExchangeSparse},
		{ExchangeDense, 1, 2, 8, ExchangeDense},
		{ExchangeAuto, 500, 2, 8, ExchangeSparse}, // 4000 bytes each way: break-even
		{ExchangeAuto, 501, 2, 8, ExchangeDense},
		{ExchangeAuto, 800, 2, 5, ExchangeSparse}, // compact encoding moves the break-even
		{ExchangeAuto, 801, 2, 5, ExchangeDense},
		{ExchangeAuto, 250, 4, 8, ExchangeSparse}, // 3·250·8 = 6000 = 1.5·4000
		{ExchangeAuto, 251, 4, 8, ExchangeDense},
		{ExchangeAuto, 1 << 30, 1, 8, ExchangeSparse},
	} {
		if got := ChooseExchange(tc.mode, tc.nnz, dim, tc.peers, tc.bpp); got != tc.want {
			t.Errorf("ChooseExchange(%v, nnz=%d, peers=%d, %v B/pair) = %v, want %v", tc.mode, tc.nnz, tc.peers, tc.bpp, got, tc.want)
		}
	}
}

// peer is one simulated replica: a model, its optimizer and scratch.
type peer struct {
	m     *LogReg
	o     Optimizer
	c     Coalescer
	local Vector
	g     Vector
	parts []Vector
	dense []float32 // the dense exchange's buffer, never cleared: DrainDense leaves it zero
}

// TestPeersMatchUnionBatch simulates synchronous training: N peers each
// compute the gradient sum of their own shard, "all-gather" them as wire
// bytes, merge and step; a single replica trains on the union of the shards.
// All peers must stay bit-identical, and match the single replica up to
// float rounding, for every optimizer and both exchange modes.
func TestPeersMatchUnionBatch(t *testing.T) {
	const dim = 300
	for _, opt := range []string{"sgd", "adagrad", "ftrl"} {
		for _, n := range []int{2, 3, 4} {
			for _, mode := range []Exchange{ExchangeSparse, ExchangeDense} {
				t.Run(fmt.Sprintf("%s/N=%d/%v", opt, n, mode), func(t *testing.T) {
					testPeersMatchUnionBatch(t, opt, n, mode, dim)
				})
			}
		}
	}
}

func testPeersMatchUnionBatch(t *testing.T, opt string, n int, mode Exchange, dim int) {
	cfg := OptimizerConfig{LR: 0.3, L2: 0.05, L1: 0.001}
	r := rand.New(rand.NewPCG(21, uint64(n)))
	newReplica := func() (*LogReg, Optimizer) {
		m, err := NewLogReg(dim)
		if err != nil {
			t.Fatal(err)
		}
		o, err := NewOptimizer(opt, dim, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m, o
	}
	single, singleOpt := newReplica()
	peers := make([]*peer, n)
	for i := range peers {
		m, o := newReplica()
		peers[i] = &peer{m: m, o: o, parts: make([]Vector, n), dense: make([]float32, dim)}
	}
	var singleGrad Vector
	wire := make([][]byte, n)
	for step := 0; step < 40; step++ {
		// Shards of unequal size, drawn from a small hot set plus a tail so
		// peers often touch the same features.
		var union CSR
		union.Reset()
		var unionLabels []float32
		shards := make([]CSR, n)
		labels := make([][]float32, n)
		for p := range shards {
			shards[p].Reset()
			for row := 0; row < 3+r.IntN(10); row++ {
				k := 1 + r.IntN(6)
				idx := make([]int32, k)
				val := make([]float32, k)
				for j := range idx {
					idx[j] = int32(r.IntN(dim))
					if r.IntN(2) == 0 {
						idx[j] = int32(r.IntN(10))
					}
					val[j] = float32(r.NormFloat64())
				}
				y := float32(r.IntN(2))
				shards[p].AppendRow(idx, val)
				labels[p] = append(labels[p], y)
				union.AppendRow(idx, val)
				unionLabels = append(unionLabels, y)
			}
		}
		if _, err := single.Gradient(union, unionLabels, &singleGrad); err != nil {
			t.Fatal(err)
		}
		singleOpt.Step(single.W, singleGrad)

		examples := len(unionLabels)
		for p, pr := range peers {
			if _, err := pr.m.GradientSum(shards[p], labels[p], &pr.local); err != nil {
				t.Fatal(err)
			}
			wire[p] = AppendVector(wire[p][:0], pr.local)
		}
		switch mode {
		case ExchangeSparse:
			for _, pr := range peers {
				for q := range wire {
					if err := DecodeVector(&pr.parts[q], wire[q], dim); err != nil {
						t.Fatal(err)
					}
				}
				if err := pr.c.MergeGradients(&pr.g, pr.parts, dim, examples); err != nil {
					t.Fatal(err)
				}
			}
		case ExchangeDense:
			// A rank-ordered dense sum in each peer's own buffer, as a ring
			// all-reduce would give every peer the same bits.
			for _, pr := range peers {
				for _, q := range peers {
					q.local.AddScaledTo(pr.dense, 1)
				}
				if err := DrainDense(&pr.g, pr.dense, examples); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, pr := range peers {
			pr.o.Step(pr.m.W, pr.g)
		}
	}
	singleOpt.Flush(single.W)
	for _, pr := range peers {
		pr.o.Flush(pr.m.W)
	}
	for p, pr := range peers[1:] {
		for i := range pr.m.W {
			if pr.m.W[i] != peers[0].m.W[i] {
				t.Fatalf("peer %d weight %d = %v, peer 0 has %v: replicas diverged", p+1, i, pr.m.W[i], peers[0].m.W[i])
			}
		}
		for s, st := range pr.o.State() {
			for i := range st {
				if st[i] != peers[0].o.State()[s][i] {
					t.Fatalf("peer %d state %d[%d] differs from peer 0", p+1, s, i)
				}
			}
		}
	}
	var moved int
	for i, w := range single.W {
		if w != 0 {
			moved++
		}
		if got := peers[0].m.W[i]; math.Abs(float64(got-w)) > 1e-5*(1+math.Abs(float64(w))) {
			t.Fatalf("weight %d: peers %v, single replica on the union batch %v", i, got, w)
		}
	}
	if moved < dim/2 {
		t.Fatalf("only %d of %d weights moved: the test exercises too little", moved, dim)
	}
}

func TestMergeGradientsRejects(t *testing.T) {
	var c Coalescer
	var dst Vector
	good := Vector{Indices: []int32{1}, Values: []float32{1}}
	bad := Vector{Indices: []int32{3, 2}, Values: []float32{1, 1}}
	if err := c.MergeGradients(&dst, []Vector{good, bad}, 10, 2); err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("unsorted part: %v, want an error naming rank 1", err)
	}
	if err := c.MergeGradients(&dst, []Vector{good}, 10, 0); err == nil {
		t.Fatal("zero examples accepted")
	}
}

// denseToGradient is the dense exchange's way back before DrainDense (the
// test's reference, and BenchmarkDenseOverhead's "before" with a clear of
// the whole buffer each step): a scan of the sum for its non-zero entries
// that leaves the sum as it was.
func denseToGradient(dst *Vector, sum []float32, examples int) {
	scale := 1 / float64(examples)
	dst.Indices, dst.Values = dst.Indices[:0], dst.Values[:0]
	for i, x := range sum {
		if x != 0 {
			dst.Indices = append(dst.Indices, int32(i))
			dst.Values = append(dst.Values, float32(float64(x)*scale))
		}
	}
}

// TestDrainDense: DrainDense gives exactly what the clear-then-scan way
// gave, and leaves every bit of the buffer zero, for entries at either end
// of a block of 16, -0 and NaN entries, lengths that are not whole blocks,
// and a buffer that does not start on a word.
func TestDrainDense(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	r := rand.New(rand.NewPCG(5, 6))
	random := make([]float32, 1000)
	for i := range random {
		if r.IntN(20) == 0 {
			random[i] = float32(r.NormFloat64())
		}
	}
	for _, tc := range []struct {
		name string
		sum  []float32
		skip int // elements before the buffer (1: not word-aligned)
	}{
		{"empty", nil, 0},
		{"all zero", make([]float32, 100), 0},
		{"first and last", append(append([]float32{3}, make([]float32, 30)...), -2), 0},
		{"block edges", setAt(make([]float32, 64), 15, 16, 31, 47, 48), 0},
		{"negative zero only", setTo(make([]float32, 40), negZero, 3, 20), 0},
		{"NaN", setTo(make([]float32, 40), nan, 17), 0},
		{"short tail", setAt(make([]float32, 19), 17, 18), 0},
		{"unaligned", setAt(make([]float32, 50), 0, 1, 16, 17, 49), 1},
		{"random", random, 0},
		{"random unaligned", random, 1},
		{"empty unaligned", nil, 1},
		{"one unaligned", []float32{5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]float32, tc.skip+len(tc.sum))
			sum := buf[tc.skip:]
			copy(sum, tc.sum)
			var want, got Vector
			denseToGradient(&want, sum, 7)
			got.Indices, got.Values = []int32{99}, []float32{99} // reused storage
			err := DrainDense(&got, sum, 7)
			if err != nil && !hasNaN(tc.sum) {
				t.Fatal(err)
			}
			if !equalBits(got, want) {
				t.Fatalf("drained %v %v, want %v %v", got.Indices, got.Values, want.Indices, want.Values)
			}
			for i, x := range buf {
				if math.Float32bits(x) != 0 {
					t.Fatalf("buf[%d] = %v after the drain, want +0", i, x)
				}
			}
		})
	}
	sum := []float32{1, 0, 2}
	var v Vector
	if err := DrainDense(&v, sum, 0); err == nil || sum[0] != 1 || v.Len() != 0 {
		t.Fatalf("0 examples: %v, sum %v, dst %v: want an error, sum untouched, dst empty", err, sum, v)
	}
}

func setAt(s []float32, at ...int) []float32 {
	for k, i := range at {
		s[i] = float32(k + 1)
	}
	return s
}

func setTo(s []float32, x float32, at ...int) []float32 {
	for _, i := range at {
		s[i] = x
	}
	return s
}

func hasNaN(s []float32) bool {
	for _, x := range s {
		if x != x {
			return true
		}
	}
	return false
}

func equalBits(a, b Vector) bool {
	if len(a.Indices) != len(b.Indices) || len(a.Values) != len(b.Values) {
		return false
	}
	for k := range a.Indices {
		if a.Indices[k] != b.Indices[k] || math.Float32bits(a.Values[k]) != math.Float32bits(b.Values[k]) {
			return false
		}
	}
	return true
}
