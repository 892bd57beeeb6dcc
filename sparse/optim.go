package sparse

import (
	"fmt"
	"math"
	"unsafe"
)

// Optimizer updates a dense weight vector from a sparse gradient, keeping any
// per-feature state dense (one float32 per feature, indexable without a map)
// but reading and writing it only at the gradient's indices.
type Optimizer interface {
	Name() string
	// Step applies one update with the gradient g, which must satisfy the
	// Vector invariant with indices below len(w). Only w[i] and the state of
	// feature i for i in g.Indices are touched.
	Step(w []float32, g Vector)
	// Flush brings every weight up to date with regularisation that Step
	// applies lazily. It is O(D): call it before evaluating, checkpointing or
	// comparing replicas, not per step.
	Flush(w []float32)
	// State returns the dense per-feature state (views, not copies), for
	// broadcast and checkpoints: each array holds len/D consecutive entries
	// per feature. Empty for SGD, whose lazy decay is settled by Flush.
	State() [][]float32
}

// OptimizerConfig holds the hyper-parameters of every optimizer; each uses
// the fields named in its constructor.
type OptimizerConfig struct {
	// LR is the learning rate of SGD and AdaGrad and the α of FTRL.
	LR float64
	// L1 is FTRL's λ1 (drives weights to exactly zero).
	L1 float64
	// L2 is SGD's weight decay (applied lazily) and FTRL's λ2.
	L2 float64
	// Beta is FTRL's β; 0 means 1, the paper's usual value.
	Beta float64
	// InitialAccumulator is AdaGrad's starting sum of squared gradients; 0
	// means 0.1, TensorFlow's default, which caps the first step at 10×LR.
	InitialAccumulator float64
}

// NewOptimizer returns "sgd", "adagrad" or "ftrl" for dim features.
func NewOptimizer(name string, dim int, cfg OptimizerConfig) (Optimizer, error) {
	switch name {
	case "sgd":
		return NewSGD(dim, cfg.LR, cfg.L2)
	case "adagrad":
		return NewAdaGrad(dim, cfg.LR, cfg.InitialAccumulator)
	case "ftrl":
		return NewFTRL(dim, cfg.LR, cfg.Beta, cfg.L1, cfg.L2)
	}
	return nil, fmt.Errorf("sparse: unknown optimizer %q: want sgd, adagrad or ftrl", name)
}

// SGD is stochastic gradient descent with L2 weight decay applied lazily.
// Dense decay would multiply all D weights by d = 1 - LR·L2 every step; SGD
// instead remembers the step at which each feature was last brought up to
// date and, when the feature is next touched (or at Flush), applies d^k for
// the k steps it missed, which is the same arithmetic (up to rounding). The
// learning rate is fixed so that d^k is well defined.
type SGD struct {
	lr    float32
	d     float64
	lnD   float64  // ln d: d^k = exp(k·ln d) is several times cheaper than Pow
	step  uint32   // steps taken; wraps after 2^32, which only gaps need
	last  []uint32 // step at which w[i] was last brought up to date; nil without L2
	table [64]float32
}

// NewSGD returns SGD with learning rate lr and L2 decay l2 (0 for none).
func NewSGD(dim int, lr, l2 float64) (*SGD, error) {
	if !(lr > 0) || math.IsInf(lr, 0) {
		return nil, fmt.Errorf("sparse: sgd learning rate %v: want a positive number", lr)
	}
	if !(l2 >= 0) || lr*l2 >= 1 {
		return nil, fmt.Errorf("sparse: sgd L2 %v with learning rate %v: want 0 <= L2 < 1/LR so the decay factor stays positive", l2, lr)
	}
	o := &SGD{lr: float32(lr), d: 1 - lr*l2, lnD: math.Log1p(-lr * l2)}
	if l2 > 0 {
		o.last = make([]uint32, dim)
	}
	for k := range o.table {
		o.table[k] = float32(math.Pow(o.d, float64(k)))
	}
	return o, nil
}

func (o *SGD) Name() string { return "sgd" }

func (o *SGD) decay(k uint32) float32 {
	if k < uint32(len(o.table)) {
		return o.table[k]
	}
	return float32(math.Exp(float64(k) * o.lnD))
}

func (o *SGD) Step(w []float32, g Vector) {
	o.step++
	vals := g.Values[:len(g.Indices)]
	if o.last == nil {
		for k, i := range g.Indices {
			w[i] -= o.lr * vals[k]
		}
		return
	}
	if len(o.last) != len(w) {
		panic(fmt.Sprintf("sparse: sgd state for %d features, weights for %d", len(o.last), len(w)))
	}
	if len(g.Indices) > 0 {
		prefetchIndexed(unsafe.Pointer(&o.last[0]), g.Indices, 2)
	}
	for k, i := range g.Indices {
		w[i] = w[i]*o.decay(o.step-o.last[i]) - o.lr*vals[k]
		o.last[i] = o.step
	}
}

func (o *SGD) Flush(w []float32) {
	if o.last == nil {
		return
	}
	for i := range w {
		if k := o.step - o.last[i]; k != 0 {
			w[i] *= o.decay(k)
			o.last[i] = o.step
		}
	}
}

func (o *SGD) State() [][]float32 { return nil }

// Lazy says whether Flush changes weights a step did not touch (L2 decay
// applied lazily).
func (o *SGD) Lazy() bool { return o.last != nil }

// AdaGrad scales each feature's step by the inverse square root of its sum
// of squared gradients: w_i -= LR·g_i / sqrt(a_i), a_i += g_i² first.
// Rare features keep large steps, frequent ones settle: the right bias for
// one-hot data with a Zipf-distributed vocabulary.
type AdaGrad struct {
	lr    float32
	Accum []float32
}

// NewAdaGrad returns AdaGrad with learning rate lr and every accumulator
// starting at initial (0 means 0.1). It fills D accumulators once.
func NewAdaGrad(dim int, lr, initial float64) (*AdaGrad, error) {
	if !(lr > 0) || math.IsInf(lr, 0) {
		return nil, fmt.Errorf("sparse: adagrad learning rate %v: want a positive number", lr)
	}
	if initial == 0 {
		initial = 0.1
	}
	if !(initial > 0) {
		return nil, fmt.Errorf("sparse: adagrad initial accumulator %v: want a positive number", initial)
	}
	o := &AdaGrad{lr: float32(lr), Accum: makeFloats(dim)}
	for i := range o.Accum {
		o.Accum[i] = float32(initial)
	}
	return o, nil
}

func (o *AdaGrad) Name() string { return "adagrad" }

func (o *AdaGrad) Step(w []float32, g Vector) {
	if len(o.Accum) != len(w) {
		panic(fmt.Sprintf("sparse: adagrad state for %d features, weights for %d", len(o.Accum), len(w)))
	}
	if len(g.Indices) > 0 {
		prefetchIndexed(unsafe.Pointer(&o.Accum[0]), g.Indices, 2)
	}
	vals := g.Values[:len(g.Indices)]
	for k, i := range g.Indices {
		gi := vals[k]
		a := o.Accum[i] + gi*gi
		o.Accum[i] = a
		w[i] -= o.lr * gi / float32(math.Sqrt(float64(a)))
	}
}

func (o *AdaGrad) Flush([]float32) {}

func (o *AdaGrad) State() [][]float32 { return [][]float32{o.Accum} }

// FTRL is FTRL-Proximal with per-coordinate learning rates (McMahan et al.,
// "Ad Click Prediction: a View from the Trenches", KDD 2013, Algorithm 1).
// Per feature it keeps z (the adjusted gradient sum) and n (the sum of
// squared gradients); the weight is a closed-form function of them:
//
//	w = 0                                           if |z| <= λ1
//	w = -(z - sign(z)·λ1) / ((β + sqrt(n))/α + λ2)  otherwise
//
// and an update with gradient g is
//
//	σ = (sqrt(n + g²) - sqrt(n)) / α;  z += g - σ·w;  n += g²
//
// followed by recomputing w. Step keeps w consistent with (z, n), so the
// weight vector must start at zero, as z and n do. z and n are interleaved
// in one array (ZN[2i] = z_i, ZN[2i+1] = n_i) so that an update touches one
// cache line of state instead of two: on 33.7M features nearly every rare
// feature's state is a cache miss.
type FTRL struct {
	alpha, beta, l1, l2 float64
	invAlpha            float64
	ZN                  []float32
}

// NewFTRL returns FTRL-Proximal with the given α, β (0 means 1), λ1 and λ2.
func NewFTRL(dim int, alpha, beta, l1, l2 float64) (*FTRL, error) {
	if beta == 0 {
		beta = 1
	}
	if !(alpha > 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("sparse: ftrl alpha %v: want a positive number", alpha)
	}
	if !(beta > 0) || !(l1 >= 0) || !(l2 >= 0) {
		return nil, fmt.Errorf("sparse: ftrl beta %v, L1 %v, L2 %v: want beta > 0 and L1, L2 >= 0", beta, l1, l2)
	}
	return &FTRL{alpha: alpha, beta: beta, l1: l1, l2: l2, invAlpha: 1 / alpha, ZN: makeFloats(2 * dim)}, nil
}

func (o *FTRL) Name() string { return "ftrl" }

func (o *FTRL) Step(w []float32, g Vector) {
	if len(o.ZN) != 2*len(w) {
		panic(fmt.Sprintf("sparse: ftrl state for %d features, weights for %d", len(o.ZN)/2, len(w)))
	}
	if len(g.Indices) > 0 {
		prefetchIndexed(unsafe.Pointer(&o.ZN[0]), g.Indices, 3)
	}
	vals := g.Values[:len(g.Indices)]
	for k, i := range g.Indices {
		gi := float64(vals[k])
		zn := o.ZN[2*int(i) : 2*int(i)+2 : 2*int(i)+2]
		n := float64(zn[1])
		nf := float32(n + gi*gi)
		sqrtNew := math.Sqrt(float64(nf))
		sigma := (sqrtNew - math.Sqrt(n)) * o.invAlpha
		z := float32(float64(zn[0]) + gi - sigma*float64(w[i]))
		zn[0], zn[1] = z, nf
		w[i] = o.weight(z, sqrtNew)
	}
}

// weight is the closed-form FTRL weight of a feature with state z and
// sqrt(n), from the stored float32 state so that w can always be rebuilt
// from State (see Rebuild).
func (o *FTRL) weight(z float32, sqrtN float64) float32 {
	zz := float64(z)
	switch {
	case zz > o.l1:
		return float32(-(zz - o.l1) / ((o.beta+sqrtN)*o.invAlpha + o.l2))
	case zz < -o.l1:
		return float32(-(zz + o.l1) / ((o.beta+sqrtN)*o.invAlpha + o.l2))
	}
	return 0
}

// Rebuild recomputes every weight from (z, n), e.g. after the state was
// received from another peer or loaded from a checkpoint. It is O(D).
func (o *FTRL) Rebuild(w []float32) {
	for i := range w {
		w[i] = o.weight(o.ZN[2*i], math.Sqrt(float64(o.ZN[2*i+1])))
	}
}

func (o *FTRL) Flush([]float32) {}

func (o *FTRL) State() [][]float32 { return [][]float32{o.ZN} }
