package nn

import (
	"testing"
)

// benchTrainStep measures ForwardBackward plus an SGD-momentum update on a
// fixed batch, the per-step work of training, and reports examples/s.
func benchTrainStep(b *testing.B, name string, batch int) {
	m, err := NewModel(name, 1)
	if err != nil {
		b.Fatal(err)
	}
	_ = 0
	if err != nil {
		b.Fatal(err)
	}
	x, labels := testBatch(1, batch, m.InputDim(), m.Classes())
	if _, err := m.ForwardBackward(x, labels, batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.ForwardBackward(x, labels, batch); err != nil {
			b.Fatal(err)
		}

	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "examples/s")
}

func BenchmarkLeNetTrainStep(b *testing.B)   { benchTrainStep(b, LeNet5, 64) }
func BenchmarkSoftmaxTrainStep(b *testing.B) { benchTrainStep(b, Softmax, 100) }
