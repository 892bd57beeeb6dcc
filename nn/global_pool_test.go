package nn

import (
	"math/rand/v2"
	"testing"
)

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"global_average_pooling2d", 300, spec(imageShape(3, 5, 4), GlobalAveragePooling2D{}), false, false},
		{"global_average_pooling2d_keepdims", 301, spec(imageShape(4, 4, 2), GlobalAveragePooling2D{KeepDims: true}), false, false},
		{"global_average_pooling2d_1x1", 302, spec(imageShape(1, 1, 3), GlobalAveragePooling2D{}), false, false},
		{"global_max_pooling2d", 303, spec(imageShape(3, 5, 4), GlobalMaxPooling2D{}), true, false},
		{"global_max_pooling2d_keepdims", 304, spec(imageShape(2, 7, 3), GlobalMaxPooling2D{KeepDims: true}), true, false},
	}...)
}

// TestGlobalPooling: each channel's mean and maximum, worked out here, in
// the shape Keras gives (a vector, or 1×1×C with keepdims); a vector
// input is refused.
func TestGlobalPooling(t *testing.T) {
	in := imageShape(3, 4, 2)
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 3
	x := randSlice(rng, n*in.Size())
	for _, tc := range []struct {
		s    LayerSpec
		out  Shape
		want func(p []float32) float32
	}{
		{GlobalAveragePooling2D{}, Shape{C: 2}, func(p []float32) float32 {
			var s float64
			for _, v := range p {
				s += float64(v)
			}
			return float32(s / float64(len(p)))
		}},
		{GlobalMaxPooling2D{KeepDims: true}, Shape{H: 1, W: 1, C: 2}, func(p []float32) float32 {
			m := p[0]
			for _, v := range p {
				m = max(m, v)
			}
			return m
		}},
	} {
		l, out, err := tc.s.build(in)
		if err != nil || out != tc.out {
			t.Fatalf("%s: output %v, %v; want %v", tc.s.kind(), out, err, tc.out)
		}
		y := make([]float32, n*l.OutSize())
		l.Forward(y, x, n)
		for p := range y {
			if want := tc.want(x[p*12 : (p+1)*12]); absDiff(y[p], want) > 1e-6 {
				t.Errorf("%s: output %d = %v, want %v", tc.s.kind(), p, y[p], want)
			}
		}
		if _, _, err := tc.s.build(Shape{C: 4}); err == nil {
			t.Errorf("%s of a vector: no error", tc.s.kind())
		}
	}
}

func absDiff(a, b float32) float32 {
	if a > b {
		return a - b
	}
	return b - a
}
