package nn

import (
	"slices"
	"testing"
)

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"up_sampling2d_2", 320, spec(imageShape(2, 3, 2), UpSampling2D{}), false, false},
		{"up_sampling2d_3x1", 321, spec(imageShape(2, 3, 2), UpSampling2D{SizeH: 3, SizeW: 1}), false, false},
		{"up_sampling2d_1x2", 322, spec(imageShape(3, 2, 1), UpSampling2D{SizeH: 1, SizeW: 2}), false, false},
	}...)
}

// TestUpSampling: each cell becomes a block of its value, nearest
// neighbour, as Keras's UpSampling2D does; factors below 1 are refused.
func TestUpSampling(t *testing.T) {
	l, out, err := UpSampling2D{SizeH: 2, SizeW: 3}.build(imageShape(2, 2, 1))
	if err != nil || out != imageShape(4, 6, 1) {
		t.Fatalf("output %v, %v", out, err)
	}
	y := make([]float32, l.OutSize())
	l.Forward(y, []float32{1, 2, 3, 4}, 1)
	want := []float32{
		1, 1, 1, 2, 2, 2,
		1, 1, 1, 2, 2, 2,
		3, 3, 3, 4, 4, 4,
		3, 3, 3, 4, 4, 4,
	}
	if !slices.Equal(y, want) {
		t.Errorf("%v, want %v", y, want)
	}
	for _, u := range []UpSampling2D{{SizeH: -1}, {SizeW: maxExample + 1}} {
		if _, _, err := u.build(imageShape(2, 2, 1)); err == nil {
			t.Errorf("%+v: no error", u)
		}
	}
}
