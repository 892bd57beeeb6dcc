package nn

import (
	"math/rand/v2"
	"testing"
)

// TestTrainCorrect: after ForwardBackward, TrainCorrect is the number of
// the batch's examples Evaluate classifies correctly with the same
// parameters (the update comes later), for every model and shard count.
func TestTrainCorrect(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range ModelNames {
		for _, shards := range []int{1, 3} {
			m, err := NewModelShards(name, 5, shards)
			if err != nil {
				t.Fatal(err)
			}
			tc, ok := m.(TrainCounter)
			if !ok {
				t.Fatalf("%s does not count its training batch's correct examples", name)
			}
			for i, p := range m.Params() { // softmax starts at zero: every score ties
				m.Params()[i] = p + 0.1*float32(rng.NormFloat64())
			}
			n := 37
			x := make([]float32, n*m.InputDim())
			for i := range x {
				x[i] = rng.Float32()
			}
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(rng.IntN(m.Classes()))
			}
			if _, err := m.ForwardBackward(x, labels, n); err != nil {
				t.Fatal(err)
			}
			got := tc.TrainCorrect()
			_, want, err := m.Evaluate(x, labels, n)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || want == 0 {
				t.Errorf("%s, %d shards: TrainCorrect %d, Evaluate counts %d", name, shards, got, want)
			}
		}
	}
}
