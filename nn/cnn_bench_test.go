package nn

import "testing"

// kerasCNN is the classic Keras MNIST CNN (conv 3×3 32 → conv 3×3 64 →
// max-pool 2 → dropout 0.25 → dense 128 → dropout 0.5 → dense 10;
// 1,199,882 parameters), the model ANCHORS.md times PyTorch on.
func kerasCNN(tb testing.TB, shards int) *Sequential {
	m, err := NewSequential("keras-cnn", Shape{H: 28, W: 28, C: 1}, 1, shards,
		Conv2D{Filters: 32, Kernel: 3}, Activation{Fn: "relu"},
		Conv2D{Filters: 64, Kernel: 3}, Activation{Fn: "relu"},
		MaxPooling2D{Size: 2}, Dropout{Rate: 0.25}, Flatten{},
		Dense{Units: 128}, Activation{Fn: "relu"}, Dropout{Rate: 0.5},
		Dense{Units: 10}, Activation{Fn: "softmax"})
	if err != nil {
		tb.Fatal(err)
	}
	if n := len(m.Params()); n != 1_199_882 {
		tb.Fatalf("%d parameters, want Keras's 1,199,882", n)
	}
	return m
}

// BenchmarkKerasCNNStep is one SGD step of the classic Keras MNIST CNN
// at batch 64 (examples/s = 64e9 / ns/op, and examples per CPU-second);
// -cpu 1 and 2 with shards 1 and 2 are the 1- and 2-thread figures beside
// PyTorch's.
func BenchmarkKerasCNNStep(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(map[int]string{1: "shards1", 2: "shards2"}[shards], func(b *testing.B) {
			benchStep(b, modelStepper(b, kerasCNN(b, shards), 64), 64)
		})
	}
}
