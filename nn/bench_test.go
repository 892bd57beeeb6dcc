package nn

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/rusage"
)

// newStepper returns a model, an SGD-momentum optimizer and a fixed batch:
// the per-step work of training.
func newStepper(tb testing.TB, name string, batch int) func() {
	m, err := NewModel(name, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return modelStepper(tb, m, batch)
}

// modelStepper is newStepper for a model built by the caller.
func modelStepper(tb testing.TB, m Model, batch int) func() {
	opt, err := NewOptimizer(SGD, OptimizerConfig{LR: 0.01, Momentum: 0.9, Params: len(m.Params())})
	if err != nil {
		tb.Fatal(err)
	}
	x, labels := testBatch(1, batch, m.InputDim(), m.Classes())
	return func() {
		if _, err := m.ForwardBackward(x, labels, batch); err != nil {
			tb.Fatal(err)
		}
		opt.Step(m.Params(), m.Grads())
	}
}

// TestTrainStepAllocs: after the first step sized the buffers, a training
// step (both shards, sequential or parallel) and an evaluation allocate nothing.
func TestTrainStepAllocs(t *testing.T) {
	for _, name := range ModelNames {
		step := newStepper(t, name, 64)
		step()
		if a := testing.AllocsPerRun(20, step); a != 0 {
			t.Errorf("%s: %v allocations per training step", name, a)
		}
	}
	// AllocsPerRun runs with GOMAXPROCS 1; count the parallel path with
	// the process-wide counter. It also sees the runtime's own rare
	// allocations (an allocation profile shows sudogs for goroutines
	// blocking on channels when the per-P cache runs dry, and timers), so
	// and GC empties the sudog caches), so the bound is "none per step":
	// fewer than one per four steps.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	step := newStepper(t, LeNet5, 64)
	step()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const steps = 200
	for range steps {
		step()
	}
	runtime.ReadMemStats(&after)
	if a := after.Mallocs - before.Mallocs; a >= steps/4 {
		t.Errorf("lenet, GOMAXPROCS 2: %d allocations in %d training steps", a, steps)
	}
	m, _ := NewModel(LeNet5, 1)
	x, labels := testBatch(1, 1000, 784, 10)
	if _, _, err := m.Evaluate(x, labels, 1000); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(3, func() { _, _, _ = m.Evaluate(x, labels, 1000) }); a != 0 {
		t.Errorf("Evaluate: %v allocations per call", a)
	}
}

func benchTrainStep(b *testing.B, name string, batch int) {
	benchStep(b, newStepper(b, name, batch), batch)
}

func benchStep(b *testing.B, step func(), batch int) {
	step()
	b.ReportAllocs()
	cpu0 := rusage.CPUTime()
	for b.Loop() {
		step()
	}
	cpu := rusage.CPUTime() - cpu0
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "examples/s")
	// On a shared machine wall time counts other processes' turns;
	// process CPU time does not (at GOMAXPROCS 2 it is the sum over cores).
	if cpu > 0 {
		b.ReportMetric(float64(b.N*batch)/cpu.Seconds(), "examples/cpu-s")
	}
}

// BenchmarkLeNetTrainStep: batch 64, as the PyTorch anchor.
func BenchmarkLeNetTrainStep(b *testing.B) { benchTrainStep(b, LeNet5, 64) }

// genericLeNet is LeNet-5 with its conv → max-pool → ReLU stages run as
// separate layers (the Sequential's generic path) instead of the fused
// convPoolReLU.
func genericLeNet(tb testing.TB) Model {
	m, err := newSequential(LeNet5, Shape{H: 28, W: 28, C: 1}, 1, DefaultShards, seqOptions{unfused: true}, lenetLayers(10))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkLeNetGenericTrainStep is BenchmarkLeNetTrainStep on the
// generic path (genericLeNet).
func BenchmarkLeNetGenericTrainStep(b *testing.B) {
	benchStep(b, modelStepper(b, genericLeNet(b), 64), 64)
}

// BenchmarkLeNetGenericVsFused alternates blocks of 4 training steps of
// LeNet-5 fused and generic (batch 64) and reports, over the blocks, the
// median wall and CPU time per step of each and the medians of their
// ratios (generic ÷ fused). On a machine shared with other work,
// alternating every few milliseconds puts both under the same load, which
// separate benchmark runs seconds apart do not. An op is one pair of
// blocks.
func BenchmarkLeNetGenericVsFused(b *testing.B) {
	const block = 4
	fused, generic := newStepper(b, LeNet5, 64), modelStepper(b, genericLeNet(b), 64)
	fused()
	generic()
	var fw, gw, fc, gc, rw, rc []float64
	timed := func(step func()) (wall, cpu float64) {
		t0, c0 := time.Now(), rusage.CPUTime()
		for range block {
			step()
		}
		return float64(time.Since(t0).Nanoseconds()) / block, float64((rusage.CPUTime() - c0).Nanoseconds()) / block
	}
	for b.Loop() {
		w1, c1 := timed(fused)
		w2, c2 := timed(generic)
		fw, fc, gw, gc = append(fw, w1), append(fc, c1), append(gw, w2), append(gc, c2)
		rw = append(rw, w2/w1)
		if c1 > 0 {
			rc = append(rc, c2/c1)
		}
	}
	median := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(fw), "fused-ns/step")
	b.ReportMetric(median(gw), "generic-ns/step")
	b.ReportMetric(median(fc), "fused-cpu-ns/step")
	b.ReportMetric(median(gc), "generic-cpu-ns/step")
	b.ReportMetric(median(rw), "wall-ratio")
	b.ReportMetric(median(rc), "cpu-ratio")
}

// BenchmarkSoftmaxTrainStep: batch 100, as the PyTorch anchor.
func BenchmarkSoftmaxTrainStep(b *testing.B) { benchTrainStep(b, Softmax, 100) }
