package nn

import "math"

// SoftmaxCrossEntropy computes the summed cross-entropy of softmax(logits)
// against integer labels for n rows of k logits, and, unless dlogits is
// nil, writes dlogits = scale·(softmax − onehot) (scale is usually 1/batch,
// giving the gradient of the mean loss). It also returns how many rows have
// their largest logit at the label (the first one on ties). The max logit is
// subtracted before exponentiating and sums run in float64, so large logits
// neither overflow nor lose the small terms. Labels must be in [0, k).
func SoftmaxCrossEntropy(logits []float32, labels []int32, n, k int, dlogits []float32, scale float32) (lossSum float64, correct int) {
	for e := 0; e < n; e++ {
		z := logits[e*k : (e+1)*k]
		y := int(labels[e])
		best := 0
		for j, v := range z {
			if v > z[best] {
				best = j
			}
		}
		if best == y {
			correct++
		}
		m := float64(z[best])
		var sum float64
		for _, v := range z {
			sum += math.Exp(float64(v) - m)
		}
		lse := m + math.Log(sum)
		lossSum += lse - float64(z[y])
		if dlogits == nil {
			continue
		}
		d := dlogits[e*k : (e+1)*k]
		for j, v := range z {
			d[j] = scale * float32(math.Exp(float64(v)-lse))
		}
		d[y] -= scale
	}
	return lossSum, correct
}

// BinaryLogistic computes the summed logistic loss log(1 + exp(−y·z)) of n
// logits z against labels y, where a label ≤ 0 counts as −1 and a label > 0
// as +1 (so both the −1/+1 and 0/1 conventions work), and, unless dz is
// nil, writes dz = scale·(−y·σ(−y·z)). It is evaluated as
// max(−yz, 0) + log1p(exp(−|yz|)), which neither overflows nor loses the
// small terms, and returns how many rows have the sign of z right.
func BinaryLogistic(z, labels []float32, n int, dz []float32, scale float32) (lossSum float64, correct int) {
	for e := 0; e < n; e++ {
		y := 1.0
		if labels[e] <= 0 {
			y = -1
		}
		m := y * float64(z[e]) // margin
		if m > 0 {
			correct++
		}
		lossSum += max(-m, 0) + math.Log1p(math.Exp(-math.Abs(m)))
		if dz != nil {
			// σ(−m) computed from the side that does not overflow.
			var s float64
			if m >= 0 {
				t := math.Exp(-m)
				s = t / (1 + t)
			} else {
				s = 1 / (1 + math.Exp(m))
			}
			dz[e] = scale * float32(-y*s)
		}
	}
	return lossSum, correct
}
