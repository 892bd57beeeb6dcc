package nn

import (
	"slices"
	"testing"
)

// TestLayerGradients's cases of the 1-D poolings (max pooling on spaced
// inputs, so that no step swaps a maximum).
func init() {
	seq := func(l, c int) Shape { return imageShape(1, l, c) }
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"max_pooling1d_2", 370, spec(seq(9, 2), MaxPooling1D{Size: 2}), true, false},
		{"max_pooling1d_3_same_stride2", 371, spec(seq(8, 3), MaxPooling1D{Size: 3, Strides: 2, Padding: Same}), true, false},
		{"average_pooling1d_2", 372, spec(seq(9, 2), AveragePooling1D{Size: 2}), false, false},
		{"average_pooling1d_3_same_stride1", 373, spec(seq(7, 2), AveragePooling1D{Size: 3, Strides: 1, Padding: Same}), false, false},
		{"global_max_pooling1d", 374, spec(seq(7, 3), GlobalMaxPooling1D{}), true, false},
		{"global_average_pooling1d", 375, spec(seq(7, 3), GlobalAveragePooling1D{}), false, false},
	}...)
}

// TestPool1DValues: windows, padding and the average over the steps
// inside the input, on one channel worked out by hand.
func TestPool1DValues(t *testing.T) {
	x := []float32{1, 5, 2, 4, 3}
	for _, tc := range []struct {
		spec LayerSpec
		want []float32
	}{
		{MaxPooling1D{Size: 2}, []float32{5, 4}},
		{MaxPooling1D{Size: 2, Padding: Same}, []float32{5, 4, 3}},
		{AveragePooling1D{Size: 2, Padding: Same}, []float32{3, 3, 3}},
		{AveragePooling1D{Size: 3, Strides: 1, Padding: Same}, []float32{3, 8. / 3, 11. / 3, 3, 3.5}},
		{MaxPooling1D{Size: 3, Strides: 2}, []float32{5, 4}},
		{GlobalMaxPooling1D{}, []float32{5}},
		{GlobalAveragePooling1D{}, []float32{3}},
	} {
		l, _, err := tc.spec.build(imageShape(1, 5, 1))
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, l.OutSize())
		l.Forward(y, x, 1)
		if !slices.Equal(y, tc.want) {
			t.Errorf("%s %+v: %v, want %v", tc.spec.kind(), tc.spec, y, tc.want)
		}
	}
	for _, s := range []LayerSpec{MaxPooling1D{Size: 2}, GlobalMaxPooling1D{}, Conv1D{Filters: 1, Kernel: 1}} {
		for _, in := range []Shape{vectorShape(5), imageShape(2, 5, 1)} {
			if _, _, err := s.build(in); err == nil {
				t.Errorf("%s on %v: no error, want it to take sequences only", s.kind(), in)
			}
		}
	}
}
