package nn

import (
	"runtime"
	"testing"

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

// BenchmarkLeNetGenericTrainStep is BenchmarkLeNetTrainStep with LeNet's
// conv → max-pool → ReLU stages run as separate layers (the Sequential's
// generic path) instead of the fused convPoolReLU.
func BenchmarkLeNetGenericTrainStep(b *testing.B) {
	m, err := newSequential(LeNet5, Shape{H: 28, W: 28, C: 1}, 1, DefaultShards, seqOptions{unfused: true}, lenetLayers(10))
	if err != nil {
		b.Fatal(err)
	}
	benchStep(b, modelStepper(b, m, 64), 64)
}

// BenchmarkSoftmaxTrainStep: batch 100, as the PyTorch anchor.
func BenchmarkSoftmaxTrainStep(b *testing.B) { benchTrainStep(b, Softmax, 100) }
