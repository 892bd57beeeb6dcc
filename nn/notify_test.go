package nn

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestNotifyGrads checks GradNotifier on Sequentials with and without
// chunked first layers, over shard counts and GOMAXPROCS: every part
// announced is already the final gradient when announced (it is
// compared with the gradient at the end of the pass), announcements go
// from the last layers down, and the gradient has the bits of a twin
// model that is not notified.
func TestNotifyGrads(t *testing.T) {
	models := []struct {
		name  string
		specs []LayerSpec
		input Shape
		// wantCalls is how many notifications a pass makes: one per
		// layer with parameters that does not run a chunk at a time.
		wantCalls int
	}{
		{"keras cnn (conv, relu, pool fused; dropout)", []LayerSpec{
			Conv2D{Filters: 8, Kernel: 3}, Activation{Fn: "relu"},
			Conv2D{Filters: 16, Kernel: 3}, Activation{Fn: "relu"},
			MaxPooling2D{Size: 2}, Dropout{Rate: 0.25}, Flatten{},
			Dense{Units: 32}, Activation{Fn: "relu"}, Dropout{Rate: 0.5},
			Dense{Units: 10}, Activation{Fn: "softmax"}}, Shape{H: 12, W: 12, C: 1}, 3},
		{"lenet", lenetLayers(10), Shape{H: 28, W: 28, C: 1}, 5},
		{"dense stack", []LayerSpec{Flatten{}, Dense{Units: 16}, Activation{Fn: "tanh"}, Dense{Units: 8},
			Activation{Fn: "sigmoid"}, Dense{Units: 1}, Activation{Fn: "sigmoid"}}, Shape{H: 4, W: 4, C: 2}, 3},
	}
	for _, md := range models {
		for _, shards := range []int{1, 2, 3} {
			for _, procs := range []int{1, 2} {
				t.Run(md.name, func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					build := func() *Sequential {
						m, err := NewSequential(md.name, md.input, 7, shards, md.specs...)
						if err != nil {
							t.Fatal(err)
						}
						return m
					}
					plain, told := build(), build()
					var los []int
					var snaps [][]float32
					told.NotifyGrads(func(lo int) {
						los = append(los, lo)
						snaps = append(snaps, slices.Clone(told.Grads()[lo:]))
					})
					rng := rand.New(rand.NewPCG(1, uint64(shards)))
					dim, classes := plain.InputDim(), plain.Classes()
					for step, n := range []int{5, 1, 2, 9} { // 1 and 2: shards without examples
						x := make([]float32, n*dim)
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
						labels := make([]int32, n)
						for i := range labels {
							labels[i] = int32(rng.IntN(classes))
						}
						plain.SetStep(0, 1, step)
						told.SetStep(0, 1, step)
						lp, err := plain.ForwardBackward(x, labels, n)
						if err != nil {
							t.Fatal(err)
						}
						los, snaps = los[:0], snaps[:0]
						lt, err := told.ForwardBackward(x, labels, n)
						if err != nil {
							t.Fatal(err)
						}
						if math.Float64bits(lp) != math.Float64bits(lt) {
							t.Fatalf("step %d: loss %v notified, %v not", step, lt, lp)
						}
						for i, g := range plain.Grads() {
							if math.Float32bits(g) != math.Float32bits(told.Grads()[i]) {
								t.Fatalf("shards %d procs %d step %d: gradient %d is %v notified, %v not", shards, procs, step, i, told.Grads()[i], g)
							}
						}
						if len(los) != md.wantCalls || !slices.Equal(los, told.GradPoints()) {
							t.Fatalf("step %d: %d notifications %v, want %d, at GradPoints %v", step, len(los), los, md.wantCalls, told.GradPoints())
						}
						for k, lo := range los {
							if k > 0 && lo >= los[k-1] {
								t.Fatalf("notifications %v do not go down", los)
							}
							if !slices.Equal(snaps[k], told.Grads()[lo:]) {
								t.Fatalf("step %d: Grads()[%d:] changed after it was announced final", step, lo)
							}
						}
					}
					// Evaluation does not notify, nor does a pass after NotifyGrads(nil).
					los = los[:0]
					x := make([]float32, 3*dim)
					if _, _, err := told.Evaluate(x, []int32{0, 0, 0}, 3); err != nil {
						t.Fatal(err)
					}
					told.NotifyGrads(nil)
					if _, err := told.ForwardBackward(x, []int32{0, 0, 0}, 3); err != nil {
						t.Fatal(err)
					}
					if len(los) != 0 {
						t.Fatalf("notified %v after NotifyGrads(nil) or in evaluation", los)
					}
				})
			}
		}
	}
}
