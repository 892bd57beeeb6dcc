package nn

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"flatten_3x2x2", 37, spec(imageShape(3, 2, 2), Flatten{}), false, false},
		{"reshape_12_to_2x3x2", 38, spec(vectorShape(12), Reshape{To: Shape{H: 2, W: -1, C: 2}}), false, false},
	}...)
}
