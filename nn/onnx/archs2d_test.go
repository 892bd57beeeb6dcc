package onnx

import "github.com/meshtrain/meshtrain/nn"

// The image layers of Keras's starting models, in the test models.
func init() {
	archs["mobile"] = nn.Architecture{Name: "mobile", Input: nn.Shape{H: 7, W: 6, C: 3}, Layers: []nn.LayerSpec{
		nn.Rescaling{Scale: 1.0 / 2, Offset: -0.5}, nn.ZeroPadding2D{Top: 1, Bottom: 2, Left: 0, Right: 1},
		nn.Conv2D{Filters: 4, Kernel: 3, KernelW: 2, Strides: 2, StridesW: 1, Padding: nn.Same, NoBias: true},
		nn.Conv2D{Filters: 4, Kernel: 2, Dilation: 2, DilationW: 3, Padding: nn.Same},
		nn.BatchNormalization{}, nn.Activation{Fn: "relu"},
		nn.DepthwiseConv2D{Kernel: 3, Multiplier: 2, Padding: nn.Same, Strides: 2}, nn.DepthwiseConv2D{Kernel: 2, NoBias: true}, nn.Conv2D{Filters: 5, Kernel: 1},
		nn.UpSampling2D{SizeH: 2, SizeW: 3}, nn.Cropping2D{Top: 1, Bottom: 0, Left: 2, Right: 1},
		nn.GlobalAveragePooling2D{}, nn.Dense{Units: 3}, nn.Activation{Fn: "softmax"}}}
	archs["normalized"] = nn.Architecture{Name: "normalized", Input: nn.Shape{H: 5, W: 5, C: 2}, Layers: []nn.LayerSpec{
		nn.Normalization{Mean: []float64{0.2, -0.1}, Variance: []float64{2, 0.5}}, nn.Conv2D{Filters: 3, Kernel: 2},
		nn.GlobalMaxPooling2D{KeepDims: true}, nn.Normalization{Mean: []float64{0.3}, Variance: []float64{4}, Invert: true},
		nn.Flatten{}, nn.Dense{Units: 2}, nn.Activation{Fn: "softmax"}}}
}
