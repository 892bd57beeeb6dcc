package nn

import (
	"math"
	"strings"
	"testing"
)

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"rescaling_image", 330, spec(imageShape(3, 4, 2), Rescaling{Scale: 1.0 / 255, Offset: -0.5}), false, false},
		{"rescaling_vector", 331, spec(Shape{C: 5}, Rescaling{Scale: -2, Offset: 1}), false, false},
		{"normalization_per_channel", 332, spec(imageShape(3, 2, 3), Normalization{Mean: []float64{0.5, -1, 2}, Variance: []float64{4, 0.25, 1e-20}}), false, false},
		{"normalization_one_value", 333, spec(imageShape(2, 2, 2), Normalization{Mean: []float64{0.1307}, Variance: []float64{0.0949}}), false, false},
		{"normalization_vector", 334, spec(Shape{C: 3}, Normalization{Mean: []float64{1, 2, 3}, Variance: []float64{1, 2, 3}}), false, false},
		{"normalization_invert", 335, spec(imageShape(2, 3, 2), Normalization{Mean: []float64{1, -1}, Variance: []float64{9, 0.5}, Invert: true}), false, false},
	}...)
}

// TestNormalizationArithmetic: Keras's (x − mean)/max(√variance, 1e-7)
// per channel of the last axis, with one value broadcast or one per
// channel; its inverse; Rescaling's x·scale + offset. Statistics that do
// not fit are refused.
func TestNormalizationArithmetic(t *testing.T) {
	in := imageShape(1, 2, 2) // planar: channel 0's two cells, then channel 1's
	x := []float32{1, 3, 10, 20}
	for _, tc := range []struct {
		s    LayerSpec
		want []float32
	}{
		{Normalization{Mean: []float64{1, 10}, Variance: []float64{4, 25}}, []float32{0, 1, 0, 2}},
		{Normalization{Mean: []float64{2}, Variance: []float64{0}}, []float32{-1e7, 1e7, 8e7, 18e7}},
		{Normalization{Mean: []float64{1, 10}, Variance: []float64{4, 25}, Invert: true}, []float32{3, 7, 60, 110}},
		{Rescaling{Scale: 0.5, Offset: 1}, []float32{1.5, 2.5, 6, 11}},
	} {
		l, out, err := tc.s.build(in)
		if err != nil || out != in {
			t.Fatalf("%+v: %v, %v", tc.s, out, err)
		}
		y := make([]float32, 4)
		l.Forward(y, x, 1)
		for i := range y {
			if math.Abs(float64(y[i]-tc.want[i])) > 1e-6*math.Abs(float64(tc.want[i]))+1e-6 {
				t.Errorf("%+v: %v, want %v", tc.s, y, tc.want)
				break
			}
		}
	}
	for _, tc := range []struct {
		s    LayerSpec
		want string
	}{
		{Normalization{Mean: []float64{1, 2, 3}, Variance: []float64{1, 2, 3}}, "for 2 channels"},
		{Normalization{Mean: []float64{1}, Variance: []float64{1, 2}}, "for 2 channels"},
		{Normalization{}, "0 means"},
		{Normalization{Mean: []float64{1}, Variance: []float64{-1}}, "below 0"},
		{Normalization{Mean: []float64{math.NaN()}, Variance: []float64{1}}, "finite"},
		{Rescaling{Scale: math.Inf(1)}, "finite"},
		{Rescaling{Scale: 1e39}, "finite"},
	} {
		if _, _, err := tc.s.build(in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", tc.s, err, tc.want)
		}
	}
}
