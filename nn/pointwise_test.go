package nn

import (
	"math"
	"testing"
)

// TestLayerGradients's cases of the element-wise functions, LeakyReLU
// and ELU: those with kinks (leaky_relu and elu at 0 for α ≠ 1, the hard
// sigmoids at their corners, which spaced inputs stay below) on spaced
// inputs.
func init() {
	for i, fn := range pointwiseFns {
		spaced := fn == "hard_sigmoid" || fn == "hard_sigmoid_tf"
		moreLayerCases = append(moreLayerCases,
			layerCase{fn + "_10", uint64(300 + i), spec(vectorShape(10), Activation{fn}), spaced, false},
			layerCase{fn + "_image", uint64(320 + i), spec(imageShape(2, 3, 2), Activation{fn}), spaced, false})
	}
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"leaky_relu_0.3", 340, spec(vectorShape(12), LeakyReLU{Alpha: 0.3}), true, false},
		{"leaky_relu_sequence", 341, spec(imageShape(1, 5, 3), LeakyReLU{Alpha: 0.01}), true, false},
		{"elu_layer_0.5", 342, spec(vectorShape(12), ELU{Alpha: 0.5}), true, false},
		{"elu_layer_image", 343, spec(imageShape(3, 2, 2), ELU{Alpha: 2}), true, false},
	}...)
}

// TestPointwiseValues pins each function to values worked out by hand
// or printed by Keras 3 and TensorFlow.js (keras.activations.*,
// tf.layers' activations), on both sides of each kink and far out.
func TestPointwiseValues(t *testing.T) {
	for _, tc := range []struct {
		fn    string
		alpha float64
		x, y  []float64
	}{
		{"elu", 1, []float64{-1, 0, 2}, []float64{math.Exp(-1) - 1, 0, 2}},
		{"leaky_relu", 0.3, []float64{-2, 0.5}, []float64{-0.6, 0.5}},
		{"selu", 0, []float64{-1, 1, 0}, []float64{-1.1113307378125628, 1.0507009873554805, 0}},
		{"gelu", 0, []float64{1, -1, 0, 3}, []float64{0.8413447460685429, -0.15865525393145707, 0, 2.9959503059052}},
		{"gelu_tanh", 0, []float64{1, -1, 0}, []float64{0.8411919906082768, -0.15880800939172324, 0}},
		{"swish", 0, []float64{1, -1, 0}, []float64{0.7310585786300049, -0.2689414213699951, 0}},
		{"softplus", 0, []float64{0, 1, -800, 800}, []float64{math.Ln2, 1.3132616875182228, 0, 800}},
		{"softsign", 0, []float64{1, -3, 0}, []float64{0.5, -0.75, 0}},
		// Keras 3: relu6(x + 3)/6.
		{"hard_sigmoid", 0, []float64{-4, -3, -1, 0, 1.5, 3, 9}, []float64{0, 0, 1. / 3, 0.5, 0.75, 1, 1}},
		// tf.keras 2's documented example: [-3, -1, 0, 1, 3] → [0, 0.3, 0.5, 0.7, 1].
		{"hard_sigmoid_tf", 0, []float64{-3, -1, 0, 1, 3}, []float64{0, 0.3, 0.5, 0.7, 1}},
	} {
		l := &pointwise{Size: 1, Fn: tc.fn, Alpha: tc.alpha}
		for i, x := range tc.x {
			y, _ := l.f(x)
			if math.Abs(y-tc.y[i]) > 1e-9*(1+math.Abs(tc.y[i])) {
				t.Errorf("%s(%v) = %.12g, want %.12g", tc.fn, x, y, tc.y[i])
			}
		}
	}
}
