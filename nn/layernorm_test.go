package nn

import (
	"math"
	"testing"
)

// TestLayerGradients's cases of LayerNormalization: after a Dense (a
// vector), on a sequence and on an image (over C at each position),
// without β or γ.
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"layer_normalization_vector", 380, spec(vectorShape(7), LayerNormalization{}), false, false},
		{"layer_normalization_sequence", 381, spec(imageShape(1, 5, 4), LayerNormalization{Epsilon: 1e-5}), false, false},
		{"layer_normalization_image", 382, spec(imageShape(3, 2, 3), LayerNormalization{Axis: 3}), false, false},
		{"layer_normalization_no_center", 383, spec(imageShape(1, 4, 3), LayerNormalization{NoCenter: true}), false, false},
		{"layer_normalization_no_scale", 384, spec(vectorShape(6), LayerNormalization{NoScale: true, Axis: -1}), false, false},
	}...)
}

// TestLayerNormValues: at each position the channels come out with mean
// β and standard deviation γ·σ/√(σ²+ε), whatever the other positions
// hold; a positive axis must be the input's last.
func TestLayerNormValues(t *testing.T) {
	l, _, err := LayerNormalization{}.build(imageShape(2, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	ln := l.(*layerNorm)
	params := []float32{2, 2, 2, 0.5, 0.5, 0.5} // γ then β
	ln.Bind(params, make([]float32, 6))
	// Channel-major: position p of channel c at c·4 + p.
	x := []float32{1, 10, -3, 0, 2, 20, -3, 0, 6, 30, 6, 0}
	y := make([]float32, 12)
	ln.Forward(y, x, 1)
	for p := 0; p < 4; p++ {
		var mean, vr, ym float64
		for c := 0; c < 3; c++ {
			mean += float64(x[c*4+p]) / 3
		}
		for c := 0; c < 3; c++ {
			d := float64(x[c*4+p]) - mean
			vr += d * d / 3
		}
		for c := 0; c < 3; c++ {
			want := 2*(float64(x[c*4+p])-mean)/math.Sqrt(vr+1e-3) + 0.5
			if math.Abs(float64(y[c*4+p])-want) > 1e-5 {
				t.Errorf("position %d channel %d: %v, want %v", p, c, y[c*4+p], want)
			}
			ym += float64(y[c*4+p]) / 3
		}
		if math.Abs(ym-0.5) > 1e-5 {
			t.Errorf("position %d: mean %v, want β = 0.5", p, ym)
		}
	}
	for _, tc := range []struct {
		in   Shape
		axis int
		ok   bool
	}{{vectorShape(3), 1, true}, {vectorShape(3), 2, false}, {imageShape(1, 4, 3), 2, true}, {imageShape(2, 4, 3), 2, false}, {imageShape(2, 4, 3), 3, true}} {
		if _, _, err := (LayerNormalization{Axis: tc.axis}).build(tc.in); (err == nil) != tc.ok {
			t.Errorf("axis %d on %v: error %v, want ok %v", tc.axis, tc.in, err, tc.ok)
		}
	}
}
