package nn

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"maxpool_2x4x4_s2", 18, func() layer { return newMaxPool2D(2, 4, 4, 2) }, true, false},
		{"maxpool_1x5x5_s2_drops_edge", 19, func() layer { return newMaxPool2D(1, 5, 5, 2) }, true, false},
		{"max_pooling2d_2_valid", 20, spec(imageShape(28, 28, 2), MaxPooling2D{Size: 2}), true, false},
		{"max_pooling2d_2_valid_odd", 21, spec(imageShape(7, 9, 2), MaxPooling2D{Size: 2}), true, false},
		{"max_pooling2d_2_valid_narrow", 22, spec(imageShape(6, 4, 3), MaxPooling2D{Size: 2}), true, false},
		{"max_pooling2d_2_same_odd", 23, spec(imageShape(5, 7, 2), MaxPooling2D{Size: 2, Padding: Same}), true, false},
		{"max_pooling2d_3_stride2_valid", 24, spec(imageShape(7, 8, 2), MaxPooling2D{Size: 3, Strides: 2}), true, false},
		{"max_pooling2d_3_stride1_same", 25, spec(imageShape(5, 6, 2), MaxPooling2D{Size: 3, Strides: 1, Padding: Same}), true, false},
		{"avgpool_2x4x6_s2", 26, func() layer { return newAvgPool2D(2, 4, 6, 2) }, false, false},
		{"avgpool_1x6x6_s3", 27, func() layer { return newAvgPool2D(1, 6, 6, 3) }, false, false},
		{"average_pooling2d_2_valid", 28, spec(imageShape(6, 8, 2), AveragePooling2D{Size: 2}), false, false},
		{"average_pooling2d_2_stride1_valid", 29, spec(imageShape(5, 5, 2), AveragePooling2D{Size: 2, Strides: 1}), false, false},
		{"average_pooling2d_3_stride2_same", 30, spec(imageShape(7, 6, 2), AveragePooling2D{Size: 3, Strides: 2, Padding: Same}), false, false},
	}...)
}
