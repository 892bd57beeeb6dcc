package nn

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
)

// Model is a classifier whose parameters all live in one flat float32
// buffer and whose gradients live in another with the same layout, so that
// an optimizer updates it with one call and a collective moves it in one
// message.
type Model interface {
	Name() string
	InputDim() int
	Classes() int
	// Params is the flat parameter buffer (a view; optimizers update it in place).
	Params() []float32
	// Grads is the flat gradient buffer, laid out like Params.
	Grads() []float32
	// ForwardBackward computes the mean loss over the batch and writes the
	// mean gradient into Grads(). x holds n×InputDim() floats and labels n
	// class ids in [0, Classes()).
	ForwardBackward(x []float32, labels []int32, n int) (loss float64, err error)
	// Evaluate returns the summed loss and the number correct over n
	// examples, without touching Grads(). Like ForwardBackward, it fails on
	// a short batch or a label outside [0, Classes()).
	Evaluate(x []float32, labels []int32, n int) (lossSum float64, correct int, err error)
	// Tensors names the parameter tensors in Params, in order, with
	// PyTorch's conventional names and shapes (conv1.weight [6 1 5 5] …
	// fc3.bias for LeNet-5; weight and bias for softmax regression), so a
	// checkpoint can store one tensor per layer that load_state_dict takes.
	Tensors() []ParamTensor
}

// ParamTensor is one named tensor of a model's flat parameter vector: the
// Size() floats from Offset, row-major in Shape.
type ParamTensor struct {
	Name   string
	Shape  []int
	Offset int
}

// Size is the number of floats in the tensor.
func (p ParamTensor) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Spec is the data a model is built for: Rows×Cols greyscale images in
// Classes classes.
type Spec struct {
	Rows, Cols, Classes int
}

// MNISTSpec is MNIST's: 28×28 images, 10 classes. NewModel and
// NewModelShards build models for it.
var MNISTSpec = Spec{Rows: 28, Cols: 28, Classes: 10}

// Model names accepted by NewModel.
const (
	LeNet5  = "lenet"
	Softmax = "softmax"
)

// ModelNames lists the names NewModel accepts.
var ModelNames = []string{LeNet5, Softmax}

// DefaultShards is how many parts a batch is split into. Each part runs on
// its own goroutine when GOMAXPROCS > 1 and in turn otherwise; the partial
// gradients are summed in part order, so a seed gives the same bits
// whatever GOMAXPROCS is.
const DefaultShards = 2

// NewModel returns a freshly initialised model ("lenet" or "softmax"); the
// same seed gives the same parameters, bit for bit.
func NewModel(name string, seed int64) (Model, error) {
	return NewModelShards(name, seed, DefaultShards)
}

// NewModelShards is NewModel with the number of batch parts set (≥ 1); see
// DefaultShards. Different part counts sum in different orders, so they
// agree only to rounding.
func NewModelShards(name string, seed int64, shards int) (Model, error) {
	return NewModelFor(name, MNISTSpec, seed, shards)
}

// NewModelFor is NewModelShards for a data set of another shape: LeNet-5
// takes 28×28 images only, softmax regression any size; both take any
// number of classes from 2 to 256 (a uint8 label).
func NewModelFor(name string, spec Spec, seed int64, shards int) (Model, error) {
	if shards < 1 {
		return nil, fmt.Errorf("nn: %d batch shards: want at least 1", shards)
	}
	if spec.Rows < 1 || spec.Cols < 1 || spec.Classes < 2 || spec.Classes > 256 {
		return nil, fmt.Errorf("nn: %s for %d×%d images in %d classes: want images of at least 1×1 and 2 to 256 classes", name, spec.Rows, spec.Cols, spec.Classes)
	}
	var build func() []Layer
	var names []string
	switch name {
	case LeNet5:
		if spec.Rows != 28 || spec.Cols != 28 {
			return nil, fmt.Errorf("nn: lenet takes 28×28 images, these are %d×%d: resize them, or use the softmax model, which takes any size", spec.Rows, spec.Cols)
		}
		build, names = func() []Layer { return lenetLayers(spec.Classes) }, lenetNames
	case Softmax:
		build, names = func() []Layer { return softmaxLayers(spec.Rows*spec.Cols, spec.Classes) }, []string{""}
	default:
		return nil, fmt.Errorf("nn: unknown model %q: want one of %v", name, ModelNames)
	}
	return newNet(name, build, names, seed, shards), nil
}

// lenetNames are the PyTorch module names of LeNet-5's layers with
// parameters, in order.
var lenetNames = []string{"conv1", "conv2", "fc1", "fc2", "fc3"}

// shaped is a layer with parameters: their shapes, weights then biases,
// in PyTorch's layouts.
type shaped interface {
	ParamShapes() [][]int
}

// tensors names the parameter tensors of layers; names[i] prefixes the
// tensors of the i-th layer with parameters ("" for none).
func tensors(layers []Layer, names []string) []ParamTensor {
	var out []ParamTensor
	off, i := 0, 0
	for _, l := range layers {
		s, ok := l.(shaped)
		if !ok || l.NumParams() == 0 {
			continue
		}
		for j, shape := range s.ParamShapes() {
			name := [2]string{"weight", "bias"}[j]
			if names[i] != "" {
				name = names[i] + "." + name
			}
			p := ParamTensor{Name: name, Shape: shape, Offset: off}
			out = append(out, p)
			off += p.Size()
		}
		i++
	}
	return out
}

// lenetLayers is LeNet-5 for 28×28 inputs: conv 5×5×6 pad 2 → ReLU →
// max-pool 2 → conv 5×5×16 → ReLU → max-pool 2 → dense 120 → ReLU →
// dense 84 → ReLU → dense classes; 61,706 parameters for 10 classes. ReLU and max-pooling
// commute (both are monotone, and the gradient reaches the same input in
// either order), so the ReLUs run after the pools, on a quarter of the
// values.
func lenetLayers(classes int) []Layer {
	c1 := NewConv2D(1, 28, 28, 6, 5, 2)
	c2 := NewConv2D(6, 14, 14, 16, 5, 0)
	d1, d2, out := NewDense(400, 120), NewDense(120, 84), NewDense(84, classes)
	for _, k := range []*Init{&c1.WeightInit, &c2.WeightInit, &d1.WeightInit, &d2.WeightInit, &out.WeightInit} {
		*k = lenetInit
	}
	return []Layer{
		newConvPoolReLU(c1),
		newConvPoolReLU(c2),
		NewFlatten(16 * 5 * 5),
		d1, NewReLU(120),
		d2, NewReLU(84),
		out,
	}
}

// lenetInit is LeNet's initialisation: the He variant PyTorch uses by
// default, which the anchors' recipe was tuned with. After one epoch of
// the anchors' recipe it scored above plain He uniform and Glorot
// (BENCHMARKS.md, "Figures behind the code": LeNet's initialisation).
const lenetInit = Torch

// softmaxLayers is multinomial logistic regression in → classes; 7,850
// parameters for MNIST.
func softmaxLayers(in, classes int) []Layer {
	d := NewDense(in, classes)
	d.WeightInit = Glorot
	return []Layer{d}
}

// net is a sequential classifier ending in softmax cross-entropy. Each
// shard is a full copy of the layer stack (their own scratch and
// activations) bound to the shared parameters and to its own gradient
// buffer; shard 0's gradient buffer is the model's.
type net struct {
	name           string
	inDim, classes int
	params, grads  []float32
	tensors        []ParamTensor
	shards         []*shard
	workers        bool // shards 1.. have goroutines
}

// modal is a layer that works differently when training (see Conv2D).
type modal interface{ setTrain(bool) }

type shard struct {
	layers []Layer
	modal  []modal // the layers that are modal
	grads  []float32
	acts   [][]float32 // acts[i] is the output of layers[i]
	dacts  [][]float32 // dacts[i] is the gradient at the output of layers[i]
	capN   int         // examples the buffers hold

	// The job: set by the caller before signalling start.
	x      []float32
	labels []int32
	n      int
	train  bool
	scale  float32
	loss   float64
	right  int

	start, done chan struct{}
}

func newNet(name string, build func() []Layer, names []string, seed int64, nshards int) *net {
	m := &net{name: name}
	proto := build()
	m.inDim, m.classes = proto[0].InSize(), proto[len(proto)-1].OutSize()
	m.tensors = tensors(proto, names)
	total := 0
	for _, l := range proto {
		total += l.NumParams()
	}
	m.params = make([]float32, total)
	for i := 0; i < nshards; i++ {
		layers := proto
		if i > 0 {
			layers = build()
		}
		s := &shard{layers: layers, grads: make([]float32, total)}
		for _, l := range layers {
			if t, ok := l.(modal); ok {
				s.modal = append(s.modal, t)
			}
		}
		if i == 0 {
			m.grads = s.grads
		}
		off := 0
		for _, l := range layers {
			np := l.NumParams()
			l.Bind(m.params[off:off+np:off+np], s.grads[off:off+np:off+np])
			off += np
		}
		m.shards = append(m.shards, s)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e6e2d696e6974)) // "nn-init"
	for _, l := range proto {
		l.Init(rng)
	}
	if nshards > 1 {
		m.workers = true
		chans := make([]chan struct{}, 0, nshards-1)
		for _, s := range m.shards[1:] {
			s.start, s.done = make(chan struct{}), make(chan struct{})
			chans = append(chans, s.start)
			go s.serve()
		}
		// The workers hold only their shard, so the model can become
		// unreachable; then their start channels are closed and they exit.
		runtime.AddCleanup(m, func(cs []chan struct{}) {
			for _, c := range cs {
				close(c)
			}
		}, chans)
	}
	return m
}

func (m *net) Name() string      { return m.name }
func (m *net) InputDim() int     { return m.inDim }
func (m *net) Classes() int      { return m.classes }
func (m *net) Params() []float32 { return m.params }
func (m *net) Grads() []float32  { return m.grads }

func (m *net) Tensors() []ParamTensor {
	out := make([]ParamTensor, len(m.tensors))
	for i, p := range m.tensors {
		out[i] = ParamTensor{Name: p.Name, Shape: slices.Clone(p.Shape), Offset: p.Offset}
	}
	return out
}

func (s *shard) serve() {
	for range s.start {
		s.run()
		s.done <- struct{}{}
	}
}

// reserve sizes the activation buffers for n examples (once, in warm-up).
func (s *shard) reserve(n int) {
	if n <= s.capN {
		return
	}
	s.acts = s.acts[:0]
	s.dacts = s.dacts[:0]
	for _, l := range s.layers {
		s.acts = append(s.acts, make([]float32, n*l.OutSize()))
		s.dacts = append(s.dacts, make([]float32, n*l.OutSize()))
	}
	s.capN = n
}

// run does the shard's job: forward, loss, and for training backward into
// s.grads (which it zeroes first).
func (s *shard) run() {
	s.loss, s.right = 0, 0
	if s.train {
		clear(s.grads)
	}
	if s.n == 0 {
		return
	}
	s.reserve(s.n)
	for _, t := range s.modal {
		t.setTrain(s.train)
	}
	in := s.x
	for i, l := range s.layers {
		l.Forward(s.acts[i], in, s.n)
		in = s.acts[i]
	}
	last := len(s.layers) - 1
	k := s.layers[last].OutSize()
	var dl []float32
	if s.train {
		dl = s.dacts[last]
	}
	s.loss, s.right = SoftmaxCrossEntropy(s.acts[last][:s.n*k], s.labels, s.n, k, dl, s.scale)
	if !s.train {
		return
	}
	for i := last; i >= 0; i-- {
		x := s.x
		var dx []float32
		if i > 0 {
			x = s.acts[i-1]
			dx = s.dacts[i-1]
		}
		s.layers[i].Backward(dx, s.dacts[i], x, s.acts[i], s.n)
	}
}

// dispatch splits n examples over the shards (contiguous, sizes differing
// by at most one), runs them, and waits for all.
func (m *net) dispatch(x []float32, labels []int32, n int, train bool, scale float32) {
	ns := len(m.shards)
	off := 0
	for i, s := range m.shards {
		c := n / ns
		if i < n%ns {
			c++
		}
		s.x, s.labels, s.n, s.train, s.scale = x[off*m.inDim:(off+c)*m.inDim], labels[off:off+c], c, train, scale
		off += c
	}
	parallel := m.workers && runtime.GOMAXPROCS(0) > 1
	if parallel {
		for _, s := range m.shards[1:] {
			s.start <- struct{}{}
		}
	} else {
		for _, s := range m.shards[1:] {
			s.run()
		}
	}
	m.shards[0].run()
	if parallel {
		for _, s := range m.shards[1:] {
			<-s.done
		}
	}
}

func (m *net) check(x []float32, labels []int32, n int) error {
	if n <= 0 {
		return fmt.Errorf("nn: %s: batch of %d examples: want at least 1", m.name, n)
	}
	if len(x) < n*m.inDim || len(labels) < n {
		return fmt.Errorf("nn: %s: batch of %d needs %d inputs and %d labels, got %d and %d",
			m.name, n, n*m.inDim, n, len(x), len(labels))
	}
	for i, y := range labels[:n] {
		if y < 0 || int(y) >= m.classes {
			return fmt.Errorf("nn: %s: label %d of example %d is outside [0, %d)", m.name, y, i, m.classes)
		}
	}
	return nil
}

func (m *net) ForwardBackward(x []float32, labels []int32, n int) (float64, error) {
	if err := m.check(x, labels, n); err != nil {
		return 0, err
	}
	m.dispatch(x, labels, n, true, 1/float32(n))
	loss := m.shards[0].loss
	for _, s := range m.shards[1:] {
		loss += s.loss
		addRows(m.grads, 0, s.grads, 0, 1, len(m.grads))
	}
	return loss / float64(n), nil
}

// TrainCorrect is the number of the last ForwardBackward's examples whose
// largest score was their label's (TrainCounter), counted with the loss.
func (m *net) TrainCorrect() int {
	c := 0
	for _, s := range m.shards {
		c += s.right
	}
	return c
}

// evalChunk bounds the examples per shard per pass in Evaluate, keeping
// its activation buffers near a training batch's.
const evalChunk = 256

func (m *net) Evaluate(x []float32, labels []int32, n int) (float64, int, error) {
	if n == 0 {
		return 0, 0, nil
	}
	if err := m.check(x, labels, n); err != nil {
		return 0, 0, err
	}
	var loss float64
	correct := 0
	step := evalChunk * len(m.shards)
	for off := 0; off < n; off += step {
		c := min(step, n-off)
		m.dispatch(x[off*m.inDim:], labels[off:], c, false, 0)
		for _, s := range m.shards {
			loss += s.loss
			correct += s.right
		}
	}
	return loss, correct, nil
}
