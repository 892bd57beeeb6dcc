package nn

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"relu_10", 31, func() layer { return newReLU(10) }, true, false},
		{"relu_37", 32, spec(vectorShape(37), Activation{"relu"}), true, false},
		{"tanh_10", 33, func() layer { return newTanh(10) }, false, false},
		{"sigmoid_image", 34, spec(imageShape(3, 4, 2), Activation{"sigmoid"}), false, false},
		{"softmax_12", 35, spec(vectorShape(12), Activation{"softmax"}), false, false},
		{"linear_12", 36, spec(vectorShape(12), Activation{"linear"}), false, false},
	}...)
}
