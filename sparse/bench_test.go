package sparse_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/sparse"
)

const (
	benchBatch   = 100
	benchBatches = 1000 // 100k distinct examples, so the hot set is realistic
)

var (
	benchOnce sync.Once
	benchData []batch
)

type batch struct {
	x      sparse.CSR
	labels []float32
}

// criteoBatches returns benchBatches batches of the Criteo-like generator
// (seed 1): 27 one-hot features per example over D = 33,762,578.
func criteoBatches(b *testing.B) []batch {
	benchOnce.Do(func() {
		g, err := criteo.NewGenerator(1, 0, 0)
		if err != nil {
			panic(err)
		}
		s := g.Stream(0)
		var ex data.Example
		benchData = make([]batch, benchBatches)
		for i := range benchData {
			benchData[i].x.Reset()
			for range benchBatch {
				s.Next(&ex)
				benchData[i].x.AppendRow(ex.Indices, ex.Values)
				benchData[i].labels = append(benchData[i].labels, ex.Label)
			}
		}
	})
	return benchData
}

// BenchmarkSparseLRStep is one local training step at D = 33,762,578, batch
// 100: forward, sparse gradient (coalesced), optimizer update.
func BenchmarkSparseLRStep(b *testing.B) {
	batches := criteoBatches(b)
	for _, name := range []string{"sgd", "adagrad", "ftrl"} {
		b.Run(name, func(b *testing.B) {
			m, err := sparse.NewLogReg(criteo.Features)
			if err != nil {
				b.Fatal(err)
			}
			o, err := sparse.NewOptimizer(name, criteo.Features, sparse.OptimizerConfig{LR: 0.1, L2: 1e-6})
			if err != nil {
				b.Fatal(err)
			}
			// Fault in every page now: a long-running trainer has touched them
			// all, and first-touch page faults would otherwise be timed.
			touchPages(m.W)
			for _, st := range o.State() {
				touchPages(st)
			}
			o.Flush(m.W) // SGD: its lazy-decay step array too
			var g sparse.Vector
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			cpu0 := sparse.ThreadCPUSeconds()
			for i := 0; i < b.N; i++ {
				bt := &batches[i%len(batches)]
				if _, err := m.Gradient(bt.x, bt.labels, &g); err != nil {
					b.Fatal(err)
				}
				o.Step(m.W, g)
			}
			// On a shared machine wall time counts the time other processes
			// held the core; this thread's CPU time does not (nor does the
			// GC of earlier runs' 400 MB, which runs on other threads).
			cpu := sparse.ThreadCPUSeconds() - cpu0
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "examples/s")
			if testing.Verbose() {
				b.Logf("N=%d wall %.3fs thread cpu %.3fs", b.N, b.Elapsed().Seconds(), cpu)
			}
			if cpu > 0 {
				b.ReportMetric(float64(b.N*benchBatch)/cpu, "examples/cpu-s")
			}
		})
	}
}

// BenchmarkExchangeMerge is the merge step of a synchronous sparse exchange
// with N peers: coalescing N rank-ordered gradient sums.
func BenchmarkExchangeMerge(b *testing.B) {
	batches := criteoBatches(b)
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			m, _ := sparse.NewLogReg(criteo.Features)
			parts := make([]sparse.Vector, n)
			var nnz int
			for p := range parts {
				if _, err := m.GradientSum(batches[p].x, batches[p].labels, &parts[p]); err != nil {
					b.Fatal(err)
				}
				nnz += parts[p].Len()
			}
			var c sparse.Coalescer
			var g sparse.Vector
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.MergeGradients(&g, parts, criteo.Features, n*benchBatch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(nnz)/float64(n), "nnz/peer")
			b.ReportMetric(float64(g.Len()), "nnz-union")
		})
	}
}

// BenchmarkWire encodes and decodes one peer's gradient sum and reports the
// bytes per (index, value) pair against the raw 8.
func BenchmarkWire(b *testing.B) {
	batches := criteoBatches(b)
	m, _ := sparse.NewLogReg(criteo.Features)
	var total, pairs int
	var g sparse.Vector
	for i := range 100 {
		if _, err := m.GradientSum(batches[i].x, batches[i].labels, &g); err != nil {
			b.Fatal(err)
		}
		total += sparse.EncodedSize(g)
		pairs += g.Len()
	}
	buf := sparse.AppendVector(nil, g)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			buf = sparse.AppendVector(buf[:0], g)
		}
		b.ReportMetric(float64(total)/float64(pairs), "bytes/pair")
		b.ReportMetric(float64(pairs)/100, "pairs/step")
	})
	b.Run("decode", func(b *testing.B) {
		var v sparse.Vector
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := sparse.DecodeVector(&v, buf, criteo.Features); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// touchPages writes every 4 KB page of s (with the value already there).
func touchPages(s []float32) {
	for i := 0; i < len(s); i += 1024 {
		s[i] += 0
	}
}

// BenchmarkUpdateMerged is the optimizer update of an N-peer synchronous
// step: the merged gradient of N batches (~3,700 features at N=4), most of
// them not read by this peer's own forward pass, so their weights and
// state are cold.
func BenchmarkUpdateMerged(b *testing.B) {
	batches := criteoBatches(b)
	for _, name := range []string{"sgd", "adagrad", "ftrl"} {
		b.Run(name+"/N=4", func(b *testing.B) {
			const n = 4
			m, err := sparse.NewLogReg(criteo.Features)
			if err != nil {
				b.Fatal(err)
			}
			o, err := sparse.NewOptimizer(name, criteo.Features, sparse.OptimizerConfig{LR: 0.1, L2: 1e-6})
			if err != nil {
				b.Fatal(err)
			}
			touchPages(m.W)
			for _, st := range o.State() {
				touchPages(st)
			}
			o.Flush(m.W)
			merged := make([]sparse.Vector, len(batches)/n)
			var c sparse.Coalescer
			parts := make([]sparse.Vector, n)
			nnz := 0
			for s := range merged {
				for p := range parts {
					bt := &batches[s*n+p]
					if _, err := m.GradientSum(bt.x, bt.labels, &parts[p]); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.MergeGradients(&merged[s], parts, criteo.Features, n*benchBatch); err != nil {
					b.Fatal(err)
				}
				nnz += merged[s].Len()
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			cpu0 := sparse.ThreadCPUSeconds()
			for i := 0; i < b.N; i++ {
				o.Step(m.W, merged[i%len(merged)])
			}
			if cpu := sparse.ThreadCPUSeconds() - cpu0; cpu > 0 {
				b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
			}
			b.ReportMetric(float64(nnz)/float64(len(merged)), "nnz")
		})
	}
}

// BenchmarkDenseOverhead is what the dense exchange does each step besides
// the all-reduce, at D = 33,762,578 with N peers' gradients (batch 100
// each, Criteo-like): ready the buffer, scatter the gradient sums into it
// (the local one, and here the others' in place of the all-reduce), and
// turn the sum back into a sparse update. "before" clears the whole buffer
// and scans it (the old DenseToGradient); "drain" is DrainDense, which
// zeroes only what it finds.
func BenchmarkDenseOverhead(b *testing.B) {
	batches := criteoBatches(b)
	for _, n := range []int{2, 4} {
		m, _ := sparse.NewLogReg(criteo.Features)
		parts := make([]sparse.Vector, n)
		for p := range parts {
			if _, err := m.GradientSum(batches[p].x, batches[p].labels, &parts[p]); err != nil {
				b.Fatal(err)
			}
		}
		for _, way := range []string{"before", "drain"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, way), func(b *testing.B) {
				buf := make([]float32, criteo.Features)
				for i := 0; i < len(buf); i += 1024 {
					buf[i] = 0 // fault the pages in, as a long run has
				}
				var g sparse.Vector
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if way == "before" {
						clear(buf)
					}
					for _, p := range parts { // local + what the all-reduce adds
						p.AddScaledTo(buf, 1)
					}
					if way == "before" {
						sparse.DenseToGradientBefore(&g, buf, n*benchBatch)
					} else if err := sparse.DrainDense(&g, buf, n*benchBatch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/step")
				b.ReportMetric(float64(g.Len()), "nnz")
			})
		}
	}
}
