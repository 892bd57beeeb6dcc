package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// moreArchitectures are testArchitectures's models of the kinds added
// after them: the text layers, the activations, LayerNormalization and
// PReLU on images.
var moreArchitectures = []Architecture{
	{Name: "text", Input: Shape{C: 12}, Layers: []LayerSpec{
		Embedding{InputDim: 50, OutputDim: 8, Name: "embed"},
		Conv1D{Filters: 6, Kernel: 3, Padding: Same},
		Activation{"elu"},
		MaxPooling1D{Size: 2},
		AveragePooling1D{Size: 2, Strides: 1, Padding: Same},
		LeakyReLU{Alpha: 0.1},
		ELU{Alpha: 0.5},
		PReLU{SharedAxes: []int{1}},
		Conv1D{Filters: 4, Kernel: 2, Dilation: 2, Padding: Causal, NoBias: true, Init: Glorot,
			KernelInit: &Initializer{Kind: InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "untruncated_normal"}},
		GlobalMaxPooling1D{},
		LayerNormalization{Epsilon: 1e-5, Axis: 1},
		Dense{Units: 7},
		Activation{"selu"},
		Dense{Units: 7},
		Activation{"hard_sigmoid"},
		Dense{Units: 7},
		Activation{"hard_sigmoid_tf"},
		Dense{Units: 7},
		Activation{"softplus"},
		Activation{"softsign"},
		Activation{"swish"},
		Activation{"gelu"},
		Activation{"gelu_tanh"},
		Dense{Units: 3},
		Activation{"softmax"},
	}},
	{Name: "text_average", Input: Shape{C: 9}, Layers: []LayerSpec{
		Embedding{InputDim: 20, OutputDim: 4, Init: &Initializer{Kind: InitRandomNormal, Stddev: 0.05}},
		Conv1D{Filters: 5, Kernel: 3, Strides: 2, Init: Torch},
		GlobalAveragePooling1D{},
		LayerNormalization{NoCenter: true, GammaInit: &Initializer{Value: 2}},
		Dense{Units: 3},
	}},
	{Name: "image_layer_norm", Input: Shape{H: 6, W: 6, C: 2}, Layers: []LayerSpec{
		Conv2D{Filters: 3, Kernel: 3},
		LayerNormalization{NoScale: true, BetaInit: &Initializer{Value: 0.1}},
		PReLU{SharedAxes: []int{1, 2}, AlphaInit: &Initializer{Value: 0.25}},
		Flatten{},
		Dense{Units: 1},
		Activation{"sigmoid"},
	}},
}

// TestSequenceTensors: the new kinds' tensors are named and shaped as
// PyTorch's Embedding, Conv1d, PReLU and LayerNorm name them.
func TestSequenceTensors(t *testing.T) {
	want := map[string][]string{
		"text": {"embed.weight [50 8]", "1.weight [6 8 3]", "1.bias [6]", "7.weight [6]", "8.weight [4 6 2]",
			"10.weight [4]", "10.bias [4]", "11.weight [7 4]", "11.bias [7]"},
		"text_average":     {"0.weight [20 4]", "1.weight [5 4 3]", "1.bias [5]", "3.weight [5]", "4.weight [3 5]", "4.bias [3]"},
		"image_layer_norm": {"0.weight [3 2 3 3]", "0.bias [3]", "1.bias [3]", "2.weight [3]", "4.weight [1 48]", "4.bias [1]"},
	}
	for _, a := range moreArchitectures {
		m, err := a.New(1, 1)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range m.Tensors() {
			got = append(got, fmt.Sprint(p.Name, " ", p.Shape))
		}
		w := want[a.Name]
		if a.Name == "text" {
			got = got[:len(w)]
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: tensors\n got %v\nwant %v", a.Name, got, w)
		}
	}
}

// TestSequenceGradients checks whole models of the text layers against
// finite differences of their mean loss, as a chain and as a graph (ids
// are the input, so only parameters vary): the text classifier of Keras's
// examples (Embedding → Conv1D → GlobalMaxPooling1D → LayerNormalization
// → Dense softmax) and one of every other new kind.
func TestSequenceGradients(t *testing.T) {
	const n, steps, vocab = 6, 10, 30
	// Keras's table of ±0.05 puts every value after it within a finite
	// difference's step of a ReLU's or a maximum's kink (the quotients
	// agreed with Backward only at steps below 2e-4); entries of a unit
	// normal keep the kinks as far as the other models' are.
	unit := &Initializer{Kind: InitRandomNormal, Stddev: 1}
	for _, tc := range []struct {
		name   string
		layers []LayerSpec
	}{
		{"text_classifier", []LayerSpec{
			Embedding{InputDim: vocab, OutputDim: 8, Init: unit}, Conv1D{Filters: 6, Kernel: 3, Padding: Same}, Activation{"relu"},
			GlobalMaxPooling1D{}, LayerNormalization{}, Dense{Units: 4}, Activation{"softmax"}}},
		{"every_kind", []LayerSpec{
			Embedding{InputDim: vocab, OutputDim: 5, Init: unit}, Conv1D{Filters: 4, Kernel: 2, Dilation: 2, Padding: Causal},
			PReLU{SharedAxes: []int{1}, AlphaInit: &Initializer{Value: 0.25}}, // (at Keras's 0, a max-pooling's two negative values tie)
			MaxPooling1D{Size: 2, Padding: Same}, LayerNormalization{}, Conv1D{Filters: 4, Kernel: 2, Strides: 2, NoBias: true},
			ELU{Alpha: 0.7}, AveragePooling1D{Size: 2, Strides: 1}, GlobalAveragePooling1D{}, Dense{Units: 6}, Activation{"gelu"},
			Dense{Units: 6}, Activation{"swish"}, LeakyReLU{Alpha: 0.2}, Dense{Units: 3}}},
	} {
		x := make([]float32, n*steps)
		rng := rand.New(rand.NewPCG(8, 8))
		for i := range x {
			x[i] = float32(rng.IntN(vocab))
		}
		labels := []int32{0, 1, 2, 0, 1, 2}
		seq, err := NewSequential(tc.name, vectorShape(steps), 5, 2, tc.layers...)
		if err != nil {
			t.Fatal(err)
		}
		nodes := make([]Node, len(tc.layers))
		for i, l := range tc.layers {
			nodes[i] = Node{l, []int{i - 1}}
		}
		graph, err := NewGraph(tc.name, vectorShape(steps), 5, 2, nodes...)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []Model{seq, graph} {
			t.Run(fmt.Sprintf("%s_%T", tc.name, m), func(t *testing.T) {
				loss := func() float64 {
					l, err := m.ForwardBackward(x, labels, n)
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				loss()
				gradCheck(t, m, slices.Clone(m.Grads()), loss)
			})
		}
		if !slices.Equal(seq.Params(), graph.Params()) {
			t.Errorf("%s: the chain and the graph start from different parameters", tc.name)
		}
	}
}

// TestSequenceResidualGraph: a residual block of sequences, two Conv1D
// branches (same and causal padding) added and layer-normalised, as a
// graph, against finite differences.
func TestSequenceResidualGraph(t *testing.T) {
	const n, steps, vocab = 4, 9, 20
	unit := &Initializer{Kind: InitRandomNormal, Stddev: 1}
	g, err := NewGraph("residual", vectorShape(steps), 3, 2,
		Node{Embedding{InputDim: vocab, OutputDim: 4, Init: unit}, []int{-1}},
		Node{Conv1D{Filters: 4, Kernel: 3, Padding: Same}, []int{0}},
		Node{Activation{"gelu"}, []int{1}},
		Node{Conv1D{Filters: 4, Kernel: 2, Dilation: 2, Padding: Causal, NoBias: true}, []int{0}},
		Node{Add{}, []int{2, 3, 0}},
		Node{LayerNormalization{}, []int{4}},
		Node{GlobalAveragePooling1D{}, []int{5}},
		Node{Dense{Units: 3}, []int{6}},
		Node{Activation{"softmax"}, []int{7}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	x := make([]float32, n*steps)
	for i := range x {
		x[i] = float32(rng.IntN(vocab))
	}
	labels := []int32{0, 1, 2, 1}
	loss := func() float64 {
		l, err := g.ForwardBackward(x, labels, n)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	loss()
	gradCheck(t, g, slices.Clone(g.Grads()), loss)
}

// TestSequenceAllocs: after the first step, a training step and an
// evaluation of a text model allocate nothing.
func TestSequenceAllocs(t *testing.T) {
	m, err := NewSequential("text", vectorShape(16), 1, 2, moreArchitectures[0].Layers[1:]...)
	if err == nil {
		t.Fatal("a text model without its Embedding built on a vector")
	}
	m, err = NewSequential("text", vectorShape(12), 1, 2, moreArchitectures[0].Layers...)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 32*12)
	for i := range x {
		x[i] = float32(i % 50)
	}
	labels := make([]int32, 32)
	step := func() {
		if _, err := m.ForwardBackward(x, labels, 32); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.Evaluate(x, labels, 32); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(5, step); a != 0 {
		t.Errorf("%v allocations per step", a)
	}
}

// TestSequenceBounds: what Check refuses of the new kinds before
// allocating, naming the layer: an Embedding's table past MaxParams, a
// Conv1D's scratch, options out of range.
func TestSequenceBounds(t *testing.T) {
	text := func(layers ...LayerSpec) Architecture {
		return Architecture{Name: "m", Input: vectorShape(64), Layers: append(layers, GlobalMaxPooling1D{}, Dense{Units: 2})}
	}
	for _, tc := range []struct {
		name  string
		a     Architecture
		want  string
		layer int
	}{
		{"table", text(Embedding{InputDim: 1 << 20, OutputDim: 1 << 10}), "layer 0 (embedding): too large for meshtrain: a table of 1048576 × 1024", 0},
		{"vocabulary", text(Embedding{InputDim: 1<<24 + 1, OutputDim: 1}), "input_dim at most 16777216", 0},
		{"output", Architecture{Name: "m", Input: vectorShape(1 << 16), Layers: []LayerSpec{Embedding{InputDim: 2, OutputDim: 1 << 10}, GlobalMaxPooling1D{}, Dense{Units: 2}}},
			"layer 0 (embedding): too large for meshtrain: 65536 steps of 1024", 0},
		{"conv1d scratch", text(Embedding{InputDim: 4, OutputDim: 1 << 12}, Conv1D{Filters: 1, Kernel: 1 << 10, Padding: Same}), "layer 1 (conv1d): too large for meshtrain", 1},
		{"conv1d weights", text(Embedding{InputDim: 4, OutputDim: 1 << 12}, Conv1D{Filters: 1 << 15, Kernel: 3}), "layer 1 (conv1d): too large for meshtrain", 1},
		{"conv1d kernel", text(Embedding{InputDim: 4, OutputDim: 2}, Conv1D{Filters: 2, Kernel: 30, Dilation: 3}), "a kernel spanning 88 steps over 1×64×2", 1},
		{"conv1d on a vector", Architecture{Name: "m", Input: vectorShape(8), Layers: []LayerSpec{Conv1D{Filters: 2, Kernel: 3}, Flatten{}, Dense{Units: 2}}},
			"layer 0 (conv1d): the input is 8: it takes a sequence", 0},
		{"conv1d stride", text(Embedding{InputDim: 4, OutputDim: 2}, Conv1D{Filters: 2, Kernel: 3, Strides: math.MaxInt, Padding: Same}), "want at least 1 filter", 1},
		{"pool stride", text(Embedding{InputDim: 4, OutputDim: 2}, MaxPooling1D{Size: 2, Strides: math.MaxInt, Padding: Same}), "pool size 2, stride", 1},
		{"pool padding", text(Embedding{InputDim: 4, OutputDim: 2}, MaxPooling1D{Size: 2, Padding: Causal}), "padding causal: pooling takes valid or same", 1},
		{"alpha", text(Embedding{InputDim: 4, OutputDim: 2}, LeakyReLU{Alpha: math.NaN()}), "alpha NaN", 1},
		{"epsilon", text(Embedding{InputDim: 4, OutputDim: 2}, LayerNormalization{Epsilon: -1}), "epsilon -1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.a.Check()
			var le *LayerError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &le) || le.Index != tc.layer {
				t.Fatalf("error %v, want one containing %q about layer %d", err, tc.want, tc.layer)
			}
		})
	}
}
