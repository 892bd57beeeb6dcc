package nn

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"dense_7_to_5", 41, func() layer { return newDense(7, 5) }, false, false},
		{"dense_20_to_17", 42, func() layer { return newDense(20, 17) }, false, false},
		{"dense_3_to_1", 43, func() layer { return newDense(3, 1) }, false, false},
		{"dense_40_to_12_glorot", 44, func() layer { d := newDense(40, 12); d.WeightInit = Glorot; return d }, false, false},
		{"dense_spec_9_to_4", 45, spec(vectorShape(9), Dense{Units: 4, Init: Torch}), false, false},
	}...)
}
