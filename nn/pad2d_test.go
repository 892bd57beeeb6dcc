package nn

import (
	"slices"
	"strings"
	"testing"
)

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"zero_padding2d_1", 310, spec(imageShape(3, 4, 2), ZeroPadding2D{1, 1, 1, 1}), false, false},
		{"zero_padding2d_uneven", 311, spec(imageShape(3, 2, 2), ZeroPadding2D{0, 2, 3, 1}), false, false},
		{"cropping2d_1", 312, spec(imageShape(5, 6, 2), Cropping2D{1, 1, 1, 1}), false, false},
		{"cropping2d_uneven", 313, spec(imageShape(6, 5, 3), Cropping2D{2, 0, 1, 3}), false, false},
	}...)
}

// TestFrame: padding places the input inside zeros and cropping cuts it
// out, at the offsets Keras's ((top, bottom), (left, right)) give; what
// cannot be done is refused.
func TestFrame(t *testing.T) {
	// A 1×3×3 image, 1 … 9 row by row.
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	in := imageShape(3, 3, 1)
	for _, tc := range []struct {
		s    LayerSpec
		out  Shape
		want []float32
	}{
		{ZeroPadding2D{1, 0, 0, 2}, imageShape(4, 5, 1), []float32{0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0, 7, 8, 9, 0, 0}},
		{Cropping2D{1, 0, 0, 2}, imageShape(2, 1, 1), []float32{4, 7}},
		{Cropping2D{0, 1, 1, 1}, imageShape(2, 1, 1), []float32{2, 5}},
	} {
		l, out, err := tc.s.build(in)
		if err != nil || out != tc.out {
			t.Fatalf("%+v: output %v, %v; want %v", tc.s, out, err, tc.out)
		}
		y := make([]float32, l.OutSize())
		l.Forward(y, x, 1)
		if !slices.Equal(y, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.s, y, tc.want)
		}
	}
	for _, tc := range []struct {
		s    LayerSpec
		in   Shape
		want string
	}{
		{Cropping2D{2, 1, 0, 0}, in, "leaves nothing"},
		{Cropping2D{0, 0, 1, 2}, in, "leaves nothing"},
		{ZeroPadding2D{-1, 0, 0, 0}, in, "want each in 0"},
		{ZeroPadding2D{0, 0, 0, maxExample + 1}, in, "want each in 0"},
		{ZeroPadding2D{1, 1, 1, 1}, Shape{C: 9}, "Reshape"},
	} {
		if _, _, err := tc.s.build(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v over %v: %v, want an error containing %q", tc.s, tc.in, err, tc.want)
		}
	}
}
