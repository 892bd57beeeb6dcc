package onnx

import (
	"path/filepath"

	"github.com/meshtrain/meshtrain/nn/keras"
)

// ResNet-20 as Keras users write it (nn/keras's Keras 3 fixture: 32×32×3,
// batch normalization, projection shortcuts), in the test models, ending
// in its class scores: with random weights and moving statistics twenty
// layers deep its softmax is one-hot, which would compare nothing.
func init() {
	km, err := keras.ReadFile(filepath.Join("..", "keras", "testdata", "resnet20_keras3.json"))
	if err != nil {
		panic("the ResNet-20 fixture: " + err.Error())
	}
	a := km.Arch
	n := len(a.Layers) - 1 // the final softmax
	a.Layers, a.Inputs = a.Layers[:n], a.Inputs[:n]
	archs["resnet20"] = a
}
