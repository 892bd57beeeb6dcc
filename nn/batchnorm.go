package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// BatchNormalization normalises each channel of its input (of an image,
// each of its C planes; of a vector, each float), as Keras's layer of
// that name does along the last axis of H×W×C: a training pass with the
// mean and (biased) variance of the channel over its batch, an
// evaluation pass with the moving statistics, then y = γ·x̂ + β.
//
// After each training pass the moving statistics become
// moving = Momentum·moving + (1−Momentum)·batch, the batch's variance the
// biased one (Keras 3's ops.moments; tf.keras 2's fused kernel took the
// unbiased one). The moving statistics are the model's buffers
// (Stateful): running_mean [C] (zeros at first) and running_var [C]
// (ones), named and laid out as PyTorch's BatchNorm2d names them; γ and β
// are its parameters weight [C] (ones) and bias [C] (zeros).
//
// A model splits a batch into DefaultShards parts; each part is
// normalised with its own statistics, as each replica's is under DDP
// without SyncBatchNorm, and the moving statistics are updated once per
// step from the whole batch's mean and variance, combined from the parts'
// in part order, so they are those of the whole batch whatever the
// split and GOMAXPROCS. Synchronized (BatchNormSyncer, syncbn.go), every
// part, and every replica's, is normalised with the global batch's.
type BatchNormalization struct {
	// Momentum and Epsilon are Keras's; 0 stands for Keras's defaults,
	// 0.99 and 1e-3.
	Momentum, Epsilon float64
	// NoCenter drops β and NoScale γ (Keras's center and scale false).
	NoCenter, NoScale bool
	Name              string // the tensors' prefix; "" for the layer's index
}

// Keras's defaults for BatchNormalization.
const (
	defaultBNMomentum = 0.99
	defaultBNEpsilon  = 1e-3
)

func (BatchNormalization) kind() string   { return "batch_normalization" }
func (b BatchNormalization) name() string { return b.Name }

// options are b's momentum and epsilon with the defaults filled in.
func (b BatchNormalization) options() (momentum, eps float64) {
	momentum, eps = b.Momentum, b.Epsilon
	if momentum == 0 {
		momentum = defaultBNMomentum
	}
	if eps == 0 {
		eps = defaultBNEpsilon
	}
	return momentum, eps
}

func (b BatchNormalization) build(in Shape) (layer, Shape, error) {
	mom, eps := b.options()
	if !(mom >= 0 && mom < 1) || !(eps > 0) || math.IsInf(eps, 0) {
		return nil, Shape{}, fmt.Errorf("momentum %v, epsilon %v: want a momentum in [0, 1) and an epsilon > 0 (0 for Keras's 0.99 and 1e-3)", b.Momentum, b.Epsilon)
	}
	plane := 1
	if !in.vector() {
		plane = in.H * in.W
	}
	l := &batchNorm{C: in.C, Plane: plane, Momentum: mom, Eps: eps, Center: !b.NoCenter, Scale: !b.NoScale,
		bmean: make([]float64, in.C), bvar: make([]float64, in.C), invstd: make([]float64, in.C)}
	return l, in, nil
}

// batchNormJSON is BatchNormalization's JSON, its options written out.
type batchNormJSON struct {
	Type     string  `json:"type"`
	Momentum float64 `json:"momentum"`
	Epsilon  float64 `json:"epsilon"`
	Center   bool    `json:"center"`
	Scale    bool    `json:"scale"`
	Name     string  `json:"name,omitempty"`
}

func init() {
	register("batch_normalization", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j batchNormJSON) (LayerSpec, error) {
			return BatchNormalization{Momentum: j.Momentum, Epsilon: j.Epsilon, NoCenter: !j.Center, NoScale: !j.Scale, Name: j.Name}, nil
		})
	})
}

func (b BatchNormalization) encode() (any, error) {
	mom, eps := b.options()
	return batchNormJSON{Type: b.kind(), Momentum: mom, Epsilon: eps, Center: !b.NoCenter, Scale: !b.NoScale, Name: b.Name}, nil
}

// batchNorm computes BatchNormalization over C channels of Plane floats
// each per example (planar, C×H×W). Its parameters are γ then β (those
// it has), its buffers the moving mean then the moving variance.
type batchNorm struct {
	C, Plane      int
	Momentum, Eps float64
	Center, Scale bool

	gamma, beta, dgamma, dbeta []float32 // nil when off
	mean, vr                   []float32 // the bound moving statistics
	train                      bool

	// The last training pass's: examples × Plane, and per channel the
	// mean and biased variance of its part of the batch (for commit).
	cnt         int
	bmean, bvar []float64
	// The last pass's 1/√(σ²+ε) per channel, and its mean in bmean.
	invstd []float64
	// sy, when set, normalises training passes over the global batch
	// (synchronized: see BatchNormSyncer); cnt and the statistics are
	// then the global batch's.
	sy *bnSync
}

func (l *batchNorm) InSize() int  { return l.C * l.Plane }
func (l *batchNorm) OutSize() int { return l.C * l.Plane }

func (l *batchNorm) NumParams() int {
	n := 0
	if l.Scale {
		n += l.C
	}
	if l.Center {
		n += l.C
	}
	return n
}

// ParamShapes and paramNames are PyTorch's BatchNorm2d's: weight (γ)
// and bias (β), those the layer has.
func (l *batchNorm) ParamShapes() [][]int {
	var s [][]int
	for range l.paramNames() {
		s = append(s, []int{l.C})
	}
	return s
}

func (l *batchNorm) paramNames() []string {
	var n []string
	if l.Scale {
		n = append(n, "weight")
	}
	if l.Center {
		n = append(n, "bias")
	}
	return n
}

func (l *batchNorm) Bind(params, grads []float32) {
	off := 0
	if l.Scale {
		l.gamma, l.dgamma = params[:l.C:l.C], grads[:l.C:l.C]
		off = l.C
	}
	if l.Center {
		l.beta, l.dbeta = params[off:off+l.C:off+l.C], grads[off:off+l.C:off+l.C]
	}
}

// Init sets γ to ones and β to zeros (Keras's initializers); it draws
// nothing from rng.
func (l *batchNorm) Init(_ *rand.Rand) {
	for i := range l.gamma {
		l.gamma[i] = 1
	}
	clear(l.beta)
}

func (l *batchNorm) NumBuffers() int { return 2 * l.C }

func (l *batchNorm) BindBuffers(buf []float32) {
	l.mean, l.vr = buf[:l.C:l.C], buf[l.C:2*l.C:2*l.C]
}

func (l *batchNorm) InitBuffers() {
	clear(l.mean)
	for i := range l.vr {
		l.vr[i] = 1
	}
}

func (l *batchNorm) BufferTensors() []ParamTensor {
	return []ParamTensor{{Name: "running_mean", Shape: []int{l.C}}, {Name: "running_var", Shape: []int{l.C}, Offset: l.C}}
}

// setTrain also forgets the last training pass's statistics, so that a
// shard with no examples in a pass adds none to commit.
func (l *batchNorm) setTrain(on bool) { l.train, l.cnt = on, 0 }

// g and b are channel c's γ and β (1 and 0 when off).
func (l *batchNorm) g(c int) float64 {
	if l.gamma == nil {
		return 1
	}
	return float64(l.gamma[c])
}

func (l *batchNorm) b(c int) float64 {
	if l.beta == nil {
		return 0
	}
	return float64(l.beta[c])
}

func (l *batchNorm) Forward(y, x []float32, n int) {
	if l.train && l.sy != nil {
		l.syncTrain(y, x, n)
		return
	}
	if n == 0 {
		return
	}
	m := float64(n * l.Plane)
	for c := 0; c < l.C; c++ {
		mean, vr := float64(0), float64(0)
		if l.train {
			for e := 0; e < n; e++ {
				o := (e*l.C + c) * l.Plane
				mean += bnSum(x[o : o+l.Plane])
			}
			mean /= m
			for e := 0; e < n; e++ {
				o := (e*l.C + c) * l.Plane
				vr += bnSqDev(x[o:o+l.Plane], mean)
			}
			vr /= m
			l.bvar[c] = vr
		} else {
			mean, vr = float64(l.mean[c]), float64(l.vr[c])
		}
		l.bmean[c] = mean
		inv := 1 / math.Sqrt(vr+l.Eps)
		l.invstd[c] = inv
		a, b, mean32 := float32(l.g(c)*inv), float32(l.b(c)), float32(mean)
		for e := 0; e < n; e++ {
			o := (e*l.C + c) * l.Plane
			bnAffine(y[o:o+l.Plane], x[o:o+l.Plane], mean32, a, b)
		}
	}
	if l.train {
		l.cnt = n * l.Plane
	}
}

// Backward is the gradient of the training pass's normalisation (through
// the batch's mean and variance) or of the evaluation pass's (an affine
// map per channel). With x̂ = (x−μ)·inv, the training pass's
// dx = γ·inv·(dy − (Σdy + x̂·Σdy·x̂)/m) is one affine map of dy and x−μ per
// channel, which bnBwdDx applies in float32; the sums are float64.
func (l *batchNorm) Backward(dx, dy, x, _ []float32, n int) {
	if l.train && l.sy != nil {
		l.syncBackward(dx, dy, x, n)
		return
	}
	if n == 0 {
		return
	}
	m := float64(n * l.Plane)
	for c := 0; c < l.C; c++ {
		mean, inv := l.bmean[c], l.invstd[c]
		var sdy, sdyx float64
		for e := 0; e < n; e++ {
			o := (e*l.C + c) * l.Plane
			s, sx := bnBwdSums(dy[o:o+l.Plane], x[o:o+l.Plane], mean)
			sdy += s
			sdyx += sx
		}
		sdyx *= inv
		if l.dgamma != nil {
			l.dgamma[c] += float32(sdyx)
		}
		if l.dbeta != nil {
			l.dbeta[c] += float32(sdy)
		}
		if dx == nil {
			continue
		}
		k := l.g(c) * inv
		var bx, cx float64
		if l.train {
			bx, cx = -k*inv*sdyx/m, -k*sdy/m
		}
		a, b, cc, mean32 := float32(k), float32(bx), float32(cx), float32(mean)
		for e := 0; e < n; e++ {
			o := (e*l.C + c) * l.Plane
			bnBwdDx(dx[o:o+l.Plane], dy[o:o+l.Plane], x[o:o+l.Plane], mean32, a, b, cc)
		}
	}
}

// bnSum is the float64 sum of x.
func bnSum(x []float32) float64 {
	s, i := float64(0), 0
	if useAsm && len(x) >= 8 {
		i = len(x) &^ 7
		s = bnSum8(i, &x[0])
	}
	for _, v := range x[i:] {
		s += float64(v)
	}
	return s
}

// bnSqDev is the float64 sum of (x−mean)².
func bnSqDev(x []float32, mean float64) float64 {
	s, i := float64(0), 0
	if useAsm && len(x) >= 8 {
		i = len(x) &^ 7
		s = bnSqDev8(i, &x[0], mean)
	}
	for _, v := range x[i:] {
		d := float64(v) - mean
		s += d * d
	}
	return s
}

// bnBwdSums are the float64 sums of dy and of dy·(x−mean).
func bnBwdSums(dy, x []float32, mean float64) (sdy, sdyx float64) {
	i := 0
	x = x[:len(dy)]
	if useAsm && len(dy) >= 8 {
		i = len(dy) &^ 7
		sdy, sdyx = bnBwdSums8(i, &dy[0], &x[0], mean)
	}
	for j, g := range dy[i:] {
		sdy += float64(g)
		sdyx += float64(g) * (float64(x[i+j]) - mean)
	}
	return sdy, sdyx
}

// bnAffine writes y = (x−mean)·a + b.
func bnAffine(y, x []float32, mean, a, b float32) {
	i := 0
	y = y[:len(x)]
	if useAsm && len(x) >= 8 {
		i = len(x) &^ 7
		bnAffine8(i, &x[0], &y[0], mean, a, b)
	}
	for j, v := range x[i:] {
		y[i+j] = float32(math.FMA(float64(v-mean), float64(a), float64(b)))
	}
}

// bnBwdDx writes dx = a·dy + (b·(x−mean) + c).
func bnBwdDx(dx, dy, x []float32, mean, a, b, c float32) {
	i := 0
	dy, x = dy[:len(dx)], x[:len(dx)]
	if useAsm && len(dx) >= 8 {
		i = len(dx) &^ 7
		bnBwdDx8(i, &dy[0], &x[0], &dx[0], mean, a, b, c)
	}
	for j, g := range dy[i:] {
		t := float32(math.FMA(float64(b), float64(x[i+j]-mean), float64(c)))
		dx[i+j] = float32(math.FMA(float64(a), float64(g), float64(t)))
	}
}

// commit sets the moving statistics from the parts' (see
// BatchNormalization): the whole batch's mean is the parts' weighted by
// their sizes, and its variance their variances plus their means'
// spread about it, summed in part order. Synchronized, every part holds
// the global batch's.
func (l *batchNorm) commit(parts []buffered) {
	if q := parts[0].(*batchNorm); q.sy != nil {
		for c := 0; c < l.C && q.cnt > 0; c++ {
			l.move(c, q.bmean[c], q.bvar[c])
		}
		return
	}
	total := 0
	for _, p := range parts {
		total += p.(*batchNorm).cnt
	}
	if total == 0 {
		return
	}
	for c := 0; c < l.C; c++ {
		var mean float64
		for _, p := range parts {
			q := p.(*batchNorm)
			mean += float64(q.cnt) * q.bmean[c]
		}
		mean /= float64(total)
		var vr float64
		for _, p := range parts {
			q := p.(*batchNorm)
			if q.cnt == 0 {
				continue
			}
			d := q.bmean[c] - mean
			vr += float64(q.cnt) * (q.bvar[c] + d*d)
		}
		l.move(c, mean, vr/float64(total))
	}
}

// move folds a batch's mean and variance of channel c into the moving
// statistics.
func (l *batchNorm) move(c int, mean, vr float64) {
	l.mean[c] = float32(l.Momentum*float64(l.mean[c]) + (1-l.Momentum)*mean)
	l.vr[c] = float32(l.Momentum*float64(l.vr[c]) + (1-l.Momentum)*vr)
}
