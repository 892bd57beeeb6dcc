package nn

import (
	"math"
	"testing"
)

// TestDropoutMaskIsTheHash pins the mask to its definition, written as a
// branch: input i of the batch is dropped exactly when the top 24 bits of
// mix(key + i·φ) are below Rate·2²⁴, and kept ones are scaled by
// 1/(1−Rate); Forward computes it with masks instead of the branch.
func TestDropoutMaskIsTheHash(t *testing.T) {
	for _, rate := range []float64{0.25, 0.5, 0.1} {
		const size, n, first = 37, 5, 3
		l := newDropout(size, rate)
		l.setTrain(true)
		key := dropoutKey(11, 2, 1, 4, 9)
		l.setStep(key, first)
		x := make([]float32, n*size)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		y := make([]float32, len(x))
		l.Forward(y, x, n)
		cut := uint64(math.Round(rate * (1 << 24)))
		scale := float32(1 / (1 - rate))
		for j, v := range x {
			m := scale
			if mix(key+(uint64(first*size)+uint64(j))*0x9e3779b97f4a7c15)>>40 < cut {
				m = 0
			}
			if want := v * m; math.Float32bits(y[j]) != math.Float32bits(want) || l.mask[j] != m {
				t.Fatalf("rate %v, input %d: y %v mask %v, want %v and %v", rate, j, y[j], l.mask[j], want, m)
			}
		}
	}
}

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"dropout_0.3_fixed_mask", 39, func() layer {
			d := newDropout(20, 0.3)
			d.setTrain(true)
			d.setStep(dropoutKey(7, 3, 1, 2, 5), 4)
			return d
		}, false, false},
		{"dropout_evaluation", 40, spec(vectorShape(20), Dropout{Rate: 0.5}), false, false},
	}...)
}
