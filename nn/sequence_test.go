package nn

import (
	"fmt"
	"slices"
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
