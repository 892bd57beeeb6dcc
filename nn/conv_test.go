package nn

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"conv_2x6x5_to_3_k3_pad1", 0, func() layer { return newConv2D(2, 6, 5, 3, 3, 1) }, false, false},
		{"conv_1x7x7_to_2_k5_pad2", 1, func() layer { return newConv2D(1, 7, 7, 2, 5, 2) }, false, false},
		{"conv_3x6x6_to_5_k3_pad0", 2, func() layer { return newConv2D(3, 6, 6, 5, 3, 0) }, false, false},
		{"conv_6x14x14_to_16_k5", 3, func() layer { return newConv2D(6, 14, 14, 16, 5, 0) }, false, false},
		{"conv_6x14x14_to_16_k5_sparse_dy", 4, func() layer { return newConv2D(6, 14, 14, 16, 5, 0) }, false, true},
		{"conv_2x6x5_to_3_k3_pad1_training", 5, func() layer { c := newConv2D(2, 6, 5, 3, 3, 1); c.setTrain(true); return c }, false, false},
		{"conv_1x28x28_to_6_k5_pad2_training", 6, func() layer { c := newConv2D(1, 28, 28, 6, 5, 2); c.setTrain(true); return c }, false, false},
		{"conv2d_k1_valid", 7, spec(imageShape(5, 4, 3), Conv2D{Filters: 2, Kernel: 1}), false, false},
		{"conv2d_k3_valid", 8, spec(imageShape(7, 6, 2), Conv2D{Filters: 3, Kernel: 3}), false, false},
		{"conv2d_k3_same", 9, spec(imageShape(6, 7, 2), Conv2D{Filters: 3, Kernel: 3, Padding: Same}), false, false},
		{"conv2d_k5_same", 10, spec(imageShape(8, 8, 1), Conv2D{Filters: 4, Kernel: 5, Padding: Same}), false, false},
		{"conv2d_k4_same_uneven_padding", 11, spec(imageShape(6, 5, 2), Conv2D{Filters: 2, Kernel: 4, Padding: Same}), false, false},
		{"conv2d_k1_stride2_valid", 12, spec(imageShape(7, 6, 2), Conv2D{Filters: 3, Kernel: 1, Strides: 2}), false, false},
		{"conv2d_k3_stride2_valid", 13, spec(imageShape(9, 8, 2), Conv2D{Filters: 3, Kernel: 3, Strides: 2}), false, false},
		{"conv2d_k3_stride2_same", 14, spec(imageShape(7, 7, 3), Conv2D{Filters: 2, Kernel: 3, Strides: 2, Padding: Same}), false, false},
		{"conv2d_k5_stride2_same", 15, spec(imageShape(10, 9, 1), Conv2D{Filters: 3, Kernel: 5, Strides: 2, Padding: Same}), false, false},
		{"conv2d_k5_stride2_same_many_taps_sparse_dy", 16, spec(imageShape(10, 10, 3), Conv2D{Filters: 4, Kernel: 5, Strides: 2, Padding: Same}), false, true},
		{"conv2d_k3_many_taps_sparse_dy", 17, spec(imageShape(9, 9, 8), Conv2D{Filters: 5, Kernel: 3, Padding: Same}), false, true},
	}...)
}
