package keras

import (
	"math/rand/v2"
	"testing"

	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/nn"
)

// resnet20 builds ResNet-20 (273,258 parameters as Keras counts them) from the tf.keras 2
// fixture as an nn.Graph with the given number of batch shards (0: the
// default).
func resnet20(tb testing.TB, shards int) nn.Model {
	f, err := ReadFile("testdata/resnet20_tfkeras2.json")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := f.Arch.Build(1, shards)
	if err != nil {
		tb.Fatal(err)
	}
	// Keras's 273,258 parameters count the 784 moving statistics too.
	if n := len(m.Params()); n != 272_474 {
		tb.Fatalf("%d trainable parameters, want ResNet-20's 272,474", n)
	}
	return m
}

// BenchmarkResNet20TrainStep is one SGD step (momentum 0.9) of ResNet-20
// at 32×32×3, batch 64, the model and batch ANCHORS.md times PyTorch on
// (examples/s, and examples per CPU-second); -cpu 1 and -cpu 2 are the
// 1- and 2-thread figures.
func BenchmarkResNet20TrainStep(b *testing.B) {
	const batch = 64
	m := resnet20(b, 0)
	opt, err := nn.NewOptimizer(nn.SGD, nn.OptimizerConfig{LR: 0.01, Momentum: 0.9, Params: len(m.Params())})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, batch*m.InputDim())
	for i := range x {
		x[i] = r.Float32()
	}
	labels := make([]int32, batch)
	for i := range labels {
		labels[i] = int32(r.IntN(m.Classes()))
	}
	step := func() {
		if _, err := m.ForwardBackward(x, labels, batch); err != nil {
			b.Fatal(err)
		}
		opt.Step(m.Params(), m.Grads())
	}
	step()
	b.ReportAllocs()
	cpu0 := rusage.CPUTime()
	for b.Loop() {
		step()
	}
	cpu := rusage.CPUTime() - cpu0
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "examples/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N*batch)/cpu.Seconds(), "examples/cpu-s")
	}
}

// TestResNet20StepAllocs: after the first step sized the buffers, a
// training step of ResNet-20's graph allocates nothing (AllocsPerRun runs
// at GOMAXPROCS 1, the shards in turn).
func TestResNet20StepAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("three ResNet-20 steps")
	}
	m := resnet20(t, 0)
	x := make([]float32, 8*m.InputDim())
	for i := range x {
		x[i] = float32(i%255) / 255
	}
	labels := make([]int32, 8)
	for i := range labels {
		labels[i] = int32(i % m.Classes())
	}
	step := func() {
		if _, err := m.ForwardBackward(x, labels, len(labels)); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(2, step); a != 0 {
		t.Errorf("%v allocations per ResNet-20 training step", a)
	}
}
