package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPredictMatchesEvaluate checks Predict against Evaluate on models
// of each ending (softmax, sigmoid, scores) as chains and graphs: the
// summed −log of the label's probability is Evaluate's loss, the argmax
// its count of correct, and a softmax's probabilities sum to one. The
// batch spans several of Predict's chunks, unevenly over the shards.
func TestPredictMatchesEvaluate(t *testing.T) {
	img := Shape{H: 6, W: 6, C: 2}
	for _, tc := range []struct {
		name  string
		build func() (Model, error)
	}{
		{"chain_softmax", func() (Model, error) {
			return NewSequential("s", img, 1, 3, Conv2D{Filters: 3, Kernel: 3, Padding: Same}, Activation{"relu"}, MaxPooling2D{Size: 2},
				Flatten{}, Dense{Units: 4}, Activation{"softmax"})
		}},
		{"chain_sigmoid", func() (Model, error) {
			return NewSequential("s", img, 2, 2, Flatten{}, Dense{Units: 1}, Activation{"sigmoid"})
		}},
		{"chain_scores", func() (Model, error) { return NewSequential("s", img, 3, 1, Flatten{}, Dense{Units: 3}) }},
		{"graph_softmax", func() (Model, error) { return NewGraph("g", img, 4, 3, residualNodes(2, 3)...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.build()
			if err != nil {
				t.Fatal(err)
			}
			p := m.(Predictor)
			n := evalChunk*3 + 7
			rng := rand.New(rand.NewPCG(5, 6))
			x := make([]float32, n*m.InputDim())
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(rng.IntN(m.Classes()))
			}
			out := make([]float32, n*p.Outputs())
			if err := p.Predict(x, n, out); err != nil {
				t.Fatal(err)
			}
			wantLoss, wantCorrect, err := m.Evaluate(x, labels, n)
			if err != nil {
				t.Fatal(err)
			}
			k := p.Outputs()
			var loss float64
			correct := 0
			for e := range n {
				z := out[e*k : (e+1)*k]
				if tc.name == "chain_scores" {
					z = softmaxOf(z)
				}
				if k == 1 {
					z = []float32{1 - z[0], z[0]}
				}
				var sum float64
				best := 0
				for j, v := range z {
					sum += float64(v)
					if v > z[best] {
						best = j
					}
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("example %d: probabilities %v sum to %v", e, z, sum)
				}
				loss -= math.Log(float64(z[labels[e]]))
				if best == int(labels[e]) {
					correct++
				}
			}
			if math.Abs(loss-wantLoss) > 1e-3*max(1, wantLoss) || correct != wantCorrect {
				t.Errorf("from Predict: loss %v, %d correct; Evaluate: %v, %d", loss, correct, wantLoss, wantCorrect)
			}
			if err := p.Predict(x, n, out[:len(out)-1]); err == nil {
				t.Error("Predict into a short buffer: no error")
			}
		})
	}
}

func softmaxOf(z []float32) []float32 {
	out := make([]float32, len(z))
	var sum float64
	for j, v := range z {
		sum += math.Exp(float64(v))
		out[j] = float32(math.Exp(float64(v)))
	}
	for j := range out {
		out[j] /= float32(sum)
	}
	return out
}

// TestArchitectureShapes checks Shapes on a chain and a graph.
func TestArchitectureShapes(t *testing.T) {
	a := Architecture{Name: "c", Input: Shape{H: 8, W: 8, C: 1}, Layers: []LayerSpec{
		Conv2D{Filters: 4, Kernel: 3, Strides: 2, Padding: Same}, MaxPooling2D{Size: 2}, Flatten{}, Dense{Units: 3}, Activation{"softmax"}}}
	got, err := a.Shapes()
	if err != nil {
		t.Fatal(err)
	}
	want := []Shape{{H: 4, W: 4, C: 4}, {H: 2, W: 2, C: 4}, {C: 16}, {C: 3}, {C: 3}}
	if len(got) != len(want) {
		t.Fatalf("shapes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("layer %d: %v, want %v", i, got[i], want[i])
		}
	}
	g := Architecture{Name: "g", Input: Shape{H: 4, W: 4, C: 2}}
	for _, n := range residualNodes(2, 3) {
		g.Layers, g.Inputs = append(g.Layers, n.Layer), append(g.Inputs, n.Inputs)
	}
	gs, err := g.Shapes()
	if err != nil || len(gs) != len(g.Layers) || gs[len(gs)-1] != (Shape{C: 3}) {
		t.Errorf("graph shapes %v, %v", gs, err)
	}
	if _, err := (Architecture{Name: "bad", Input: Shape{C: 3}, Layers: []LayerSpec{Conv2D{Filters: 1, Kernel: 3}}}).Shapes(); err == nil {
		t.Error("a convolution of a vector: no error")
	}
}
