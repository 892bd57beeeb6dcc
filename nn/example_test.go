package nn_test

import (
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// A small convolutional network for 28×28 greyscale images in 10 classes,
// composed of nn's layers. Its shapes are inferred from the input; it
// ends in softmax cross-entropy; its first stage (convolution, ReLU, 2×2
// max-pooling) runs as one fused layer. mirrored trains it when
// Job.NewModel returns it.
func ExampleNewSequential() {
	m, err := nn.NewSequential("cnn", nn.Shape{H: 28, W: 28, C: 1}, 1, 0,
		nn.Conv2D{Filters: 8, Kernel: 3, Padding: nn.Same},
		nn.Activation{Fn: "relu"},
		nn.MaxPooling2D{Size: 2},
		nn.Conv2D{Filters: 16, Kernel: 3, Strides: 2, Name: "down"},
		nn.Activation{Fn: "relu"},
		nn.AveragePooling2D{Size: 2, Padding: nn.Same},
		nn.Flatten{},
		nn.Dropout{Rate: 0.25},
		nn.Dense{Units: 10},
		nn.Activation{Fn: "softmax"},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(m.Summary())

	_, err = nn.NewSequential("bad", nn.Shape{H: 28, W: 28, C: 1}, 1, 0,
		nn.Conv2D{Filters: 8, Kernel: 3}, nn.Dense{Units: 10})
	fmt.Println(err)
	// Output:
	// cnn: 28×28×1 → 10 classes, softmax cross-entropy, 2698 parameters
	// #  layer               output   tensors
	// 0  conv2d              28×28×8  0.weight [8 1 3 3], 0.bias [8]
	// 1  activation relu     28×28×8
	// 2  max_pooling2d       14×14×8
	// 3  conv2d              6×6×16   down.weight [16 8 3 3], down.bias [16]
	// 4  activation relu     6×6×16
	// 5  average_pooling2d   3×3×16
	// 6  flatten             144
	// 7  dropout             144
	// 8  dense               10       8.weight [10 144], 8.bias [10]
	// 9  activation softmax  10
	// layers 0–2 run as one fused layer
	// nn: bad: layer 1 (dense): the input is an image, 26×26×8: put a Flatten before it
}
