package nn

import (
	"fmt"
	"math"
)

// Optimizer updates a whole flat parameter vector from a flat gradient
// vector of the same layout, in place, once per step.
type Optimizer interface {
	// Step applies one update. params and grads must have the length the
	// optimizer was built for (a mismatch panics); grads is not modified.
	Step(params, grads []float32)
	// State is the optimizer's flat state (momentum buffer; Adam's two
	// moments and step count; empty for plain SGD), a view that can be
	// broadcast or checkpointed and written back in place.
	State() []float32
	// StateParts names the consecutive parts of State, with PyTorch's
	// names for them (momentum_buffer; exp_avg, exp_avg_sq, step).
	StateParts() []StatePart
	SetLR(lr float64)
	LR() float64
}

// StatePart is one part of an optimizer's flat state: Len floats, which
// are PerParam (laid out like the parameters, one per parameter) or not
// (Adam's step count).
type StatePart struct {
	Name     string
	Len      int
	PerParam bool
}

// Optimizer names accepted by NewOptimizer.
const (
	SGD      = "sgd"      // plain SGD, or heavy-ball momentum if Momentum > 0 (PyTorch's SGD)
	Momentum = "momentum" // heavy-ball momentum; Momentum must be > 0
	Nesterov = "nesterov" // Nesterov momentum; Momentum must be > 0
	Adam     = "adam"
)

// OptimizerNames lists the names NewOptimizer accepts.
var OptimizerNames = []string{SGD, Momentum, Nesterov, Adam}

// OptimizerConfig holds every optimizer's hyper-parameters; each uses the
// ones that concern it. Zero Beta1, Beta2 and Eps take Adam's usual
// 0.9, 0.999 and 1e-8.
type OptimizerConfig struct {
	Params      int     // length of the parameter vector
	LR          float64 // learning rate, > 0
	Momentum    float64 // in [0, 1)
	WeightDecay float64 // L2 penalty added to the gradient (PyTorch's weight_decay), ≥ 0
	Beta1       float64 // Adam, in [0, 1)
	Beta2       float64 // Adam, in [0, 1)
	Eps         float64 // Adam, > 0
}

// NewOptimizer returns the named optimizer for cfg.Params parameters,
// with its state zeroed.
func NewOptimizer(name string, cfg OptimizerConfig) (Optimizer, error) {
	if cfg.Params <= 0 {
		return nil, fmt.Errorf("nn: optimizer for %d parameters: want at least 1", cfg.Params)
	}
	if !(cfg.LR > 0) || math.IsInf(cfg.LR, 0) {
		return nil, fmt.Errorf("nn: learning rate %v: want a finite value > 0", cfg.LR)
	}
	if !(cfg.Momentum >= 0 && cfg.Momentum < 1) {
		return nil, fmt.Errorf("nn: momentum %v: want a value in [0, 1)", cfg.Momentum)
	}
	if !(cfg.WeightDecay >= 0) || math.IsInf(cfg.WeightDecay, 0) {
		return nil, fmt.Errorf("nn: weight decay %v: want a finite value ≥ 0", cfg.WeightDecay)
	}
	switch name {
	case SGD:
		o := &sgd{lr: cfg.LR, mu: float32(cfg.Momentum), wd: float32(cfg.WeightDecay), n: cfg.Params}
		if cfg.Momentum > 0 {
			o.v = make([]float32, cfg.Params)
		}
		return o, nil
	case Momentum, Nesterov:
		if cfg.Momentum == 0 {
			return nil, fmt.Errorf("nn: optimizer %q needs a momentum in (0, 1), got 0", name)
		}
		return &sgd{lr: cfg.LR, mu: float32(cfg.Momentum), wd: float32(cfg.WeightDecay), nesterov: name == Nesterov,
			n: cfg.Params, v: make([]float32, cfg.Params)}, nil
	case Adam:
		b1, b2, eps := cfg.Beta1, cfg.Beta2, cfg.Eps
		if b1 == 0 {
			b1 = 0.9
		}
		if b2 == 0 {
			b2 = 0.999
		}
		if eps == 0 {
			eps = 1e-8
		}
		if !(b1 > 0 && b1 < 1) || !(b2 > 0 && b2 < 1) || !(eps > 0) {
			return nil, fmt.Errorf("nn: adam betas (%v, %v) and eps %v: want betas in (0, 1) and eps > 0", b1, b2, eps)
		}
		st := make([]float32, 2*cfg.Params+1)
		return &adam{lr: cfg.LR, b1: b1, b2: b2, eps: eps, wd: float32(cfg.WeightDecay), n: cfg.Params,
			state: st, m: st[:cfg.Params], v: st[cfg.Params : 2*cfg.Params]}, nil
	default:
		return nil, fmt.Errorf("nn: unknown optimizer %q: want one of %v", name, OptimizerNames)
	}
}

func checkLens(n int, params, grads []float32) {
	if len(params) != n || len(grads) != n {
		panic(fmt.Sprintf("nn: optimizer built for %d parameters got %d params and %d grads", n, len(params), len(grads)))
	}
}

// sgd is SGD with optional heavy-ball or Nesterov momentum, as PyTorch
// computes it (no dampening):
//
//	g ← grad + wd·p;  v ← μ·v + g;  p ← p − lr·(nesterov ? g + μ·v : v)
type sgd struct {
	lr       float64
	mu, wd   float32
	nesterov bool
	n        int
	v        []float32 // momentum buffer; nil without momentum
}

func (o *sgd) State() []float32 { return o.v }

func (o *sgd) StateParts() []StatePart {
	if o.v == nil {
		return nil
	}
	return []StatePart{{"momentum_buffer", o.n, true}}
}
func (o *sgd) SetLR(lr float64) { o.lr = lr }
func (o *sgd) LR() float64      { return o.lr }

func (o *sgd) Step(params, grads []float32) {
	checkLens(o.n, params, grads)
	lr, mu, wd := float32(o.lr), o.mu, o.wd
	if o.v == nil {
		for i, g := range grads {
			params[i] -= lr * (g + wd*params[i])
		}
		return
	}
	v := o.v[:len(params)]
	if o.nesterov {
		for i, g := range grads {
			g += wd * params[i]
			v[i] = mu*v[i] + g
			params[i] -= lr * (g + mu*v[i])
		}
		return
	}
	i := 0
	if n8 := len(params) / 8; useAsm && n8 > 0 {
		grads = grads[:len(params)]
		sgdMomentum8(n8, &params[0], &grads[0], &v[0], lr, mu, wd)
		i = 8 * n8
	}
	for ; i < len(params); i++ {
		v[i] = mu*v[i] + (grads[i] + wd*params[i])
		params[i] -= lr * v[i]
	}
}

// adam is Adam (Kingma & Ba) with bias correction and PyTorch's coupled
// weight decay:
//
//	g ← grad + wd·p;  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//	p ← p − lr·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)
//
// Its state is m, then v, then t (as a float32, exact up to 2²⁴ steps).
type adam struct {
	lr, b1, b2, eps float64
	wd              float32
	n               int
	state, m, v     []float32
}

func (o *adam) State() []float32 { return o.state }

func (o *adam) StateParts() []StatePart {
	return []StatePart{{"exp_avg", o.n, true}, {"exp_avg_sq", o.n, true}, {"step", 1, false}}
}
func (o *adam) SetLR(lr float64) { o.lr = lr }
func (o *adam) LR() float64      { return o.lr }

func (o *adam) Step(params, grads []float32) {
	checkLens(o.n, params, grads)
	t := float64(o.state[2*o.n]) + 1
	o.state[2*o.n] = float32(t)
	c1 := 1 - math.Pow(o.b1, t)
	c2 := 1 - math.Pow(o.b2, t)
	// p -= (lr/c1)·m / (√v/√c2 + ε)
	step := float32(o.lr / c1)
	invSqrtC2 := float32(1 / math.Sqrt(c2))
	b1, b2, eps, wd := float32(o.b1), float32(o.b2), float32(o.eps), o.wd
	m, v := o.m[:len(params)], o.v[:len(params)]
	for i, g := range grads {
		g += wd * params[i]
		m[i] = b1*m[i] + (1-b1)*g
		v[i] = b2*v[i] + (1-b2)*g*g
		params[i] -= step * m[i] / (float32(math.Sqrt(float64(v[i])))*invSqrtC2 + eps)
	}
}
