// Package testmodels holds the test models that the exporters' tests
// (nn/kerasio's, nn/onnx's) share: one definition each, so that both
// formats are checked on the same graphs.
package testmodels

import (
	"fmt"
	"path/filepath"

	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// Merges is a test graph of the merge layers: every element-wise merge
// (n-ary ones of three inputs), a squeeze-and-excitation product of an
// image by its 1×1×C pooling and by its pooled vector (broadcast),
// Concatenate along channels and rows, and of a flattened image with a
// Dense's output; with a Subtract (which TF.js lacks) or an Add in its
// place.
func Merges(subtract bool) nn.Architecture {
	a := nn.Architecture{Name: "merges", Input: nn.Shape{H: 4, W: 3, C: 2}}
	add := func(s nn.LayerSpec, in ...int) int {
		a.Layers, a.Inputs = append(a.Layers, s), append(a.Inputs, in)
		return len(a.Layers) - 1
	}
	c0 := add(nn.Conv2D{Filters: 2, Kernel: 1}, -1)
	c1 := add(nn.Conv2D{Filters: 2, Kernel: 3, Padding: nn.Same}, -1)
	var sub int
	if subtract {
		sub = add(nn.Subtract{}, c0, c1)
	} else {
		sub = add(nn.Add{}, c0, c1)
	}
	mul := add(nn.Multiply{}, sub, c0, c1)
	avg := add(nn.Average{}, mul, -1, c0)
	mx := add(nn.Maximum{}, avg, c0)
	mn := add(nn.Minimum{}, mx, c1, -1)
	cat := add(nn.Concatenate{Axis: -1}, mn, sub) // 4×3×4
	gap := add(nn.GlobalAveragePooling2D{KeepDims: true}, cat)
	se := add(nn.Multiply{}, cat, gap)
	gmp := add(nn.GlobalMaxPooling2D{}, se) // a vector of 4
	se2 := add(nn.Multiply{}, se, gmp)
	rows := add(nn.Concatenate{Axis: 1}, se2, cat) // 8×3×4
	flat := add(nn.Flatten{}, rows)
	d := add(nn.Dense{Units: 3}, flat)
	joined := add(nn.Concatenate{}, flat, d)
	out := add(nn.Dense{Units: 3}, joined)
	add(nn.Activation{Fn: "softmax"}, out)
	return a
}

// ResNet20Scores is ResNet-20 as Keras users write it (nn/keras's Keras 3
// fixture, read from the testdata directory kerasTestdata: 32×32×3, batch
// normalization, projection shortcuts) ending in its class scores: with
// random weights and moving statistics twenty layers deep its softmax is
// one-hot, which would compare nothing.
func ResNet20Scores(kerasTestdata string) (nn.Architecture, error) {
	km, err := keras.ReadFile(filepath.Join(kerasTestdata, "resnet20_keras3.json"))
	if err != nil {
		return nn.Architecture{}, fmt.Errorf("the ResNet-20 fixture: %w", err)
	}
	a := km.Arch
	n := len(a.Layers) - 1 // the final softmax
	a.Layers, a.Inputs = a.Layers[:n], a.Inputs[:n]
	return a, nil
}
