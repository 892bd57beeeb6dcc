package onnx

import "github.com/meshtrain/meshtrain/nn"

// The layers of Keras's text and tabular examples, in the test models:
// a text classifier on token ids (Embedding, same and causal dilated
// Conv1D, LayerNormalization, PReLU per channel, 1-D pooling), a time
// series (a sequence input), and an MLP through every activation.
func init() {
	archs["text"] = nn.Architecture{Name: "text", Input: nn.Shape{C: 12}, Layers: []nn.LayerSpec{
		nn.Embedding{InputDim: 20, OutputDim: 6}, nn.Conv1D{Filters: 8, Kernel: 3, Padding: nn.Same},
		nn.LayerNormalization{}, nn.Activation{Fn: "gelu"}, nn.MaxPooling1D{Size: 2},
		nn.Conv1D{Filters: 4, Kernel: 2, Padding: nn.Causal, Dilation: 2, NoBias: true}, nn.PReLU{SharedAxes: []int{1}},
		nn.AveragePooling1D{Size: 2, Padding: nn.Same}, nn.Conv1D{Filters: 4, Kernel: 2, Strides: 2}, nn.GlobalMaxPooling1D{},
		nn.Dense{Units: 3}, nn.Activation{Fn: "softmax"}}}
	vocabulary["text"] = 20
	archs["series"] = nn.Architecture{Name: "series", Input: nn.Shape{H: 1, W: 10, C: 2}, Layers: []nn.LayerSpec{
		nn.Conv1D{Filters: 3, Kernel: 3}, nn.LeakyReLU{Alpha: 0.2}, nn.Flatten{}, nn.LayerNormalization{NoCenter: true},
		nn.Dense{Units: 4}, nn.ELU{Alpha: 0.7}, nn.Dense{Units: 2}, nn.Activation{Fn: "softmax"}}}
	archs["activations"] = nn.Architecture{Name: "activations", Input: nn.Shape{C: 6}, Layers: []nn.LayerSpec{
		nn.Dense{Units: 8}, nn.Activation{Fn: "elu"}, nn.Activation{Fn: "selu"}, nn.Activation{Fn: "swish"},
		nn.Dense{Units: 8}, nn.Activation{Fn: "softplus"}, nn.Activation{Fn: "softsign"}, nn.Activation{Fn: "gelu_tanh"},
		nn.Dense{Units: 8}, nn.Activation{Fn: "hard_sigmoid_tf"}, nn.PReLU{},
		nn.Dense{Units: 2}, nn.Activation{Fn: "softmax"}}}
}

func init() {
	// Keras 3's hard_sigmoid, which no TF.js file holds (kerasio refuses
	// it), and the tanh approximation of gelu, in ONNX only.
	archs["hard"] = nn.Architecture{Name: "hard", Input: nn.Shape{C: 4}, Layers: []nn.LayerSpec{
		nn.Dense{Units: 5}, nn.Activation{Fn: "hard_sigmoid"}, nn.Dense{Units: 2}}}
}
