package nn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/meshtrain/meshtrain/nn/statsync"
)

// Sequential is a classifier whose layers run one after the other, built
// by NewSequential from LayerSpecs. It is a Model: mirrored trains it
// through Job.NewModel, and nn's built-in models (NewModelFor) are
// Sequentials.
//
// A batch is split into shards (see DefaultShards), each with its own copy
// of the layers and its own gradient buffer, all bound to the one
// parameter vector; shard 0's gradient buffer is the model's, and the
// others' are added to it in shard order. It is Stateful: its BatchNormalization
// layers' moving statistics are its buffers, which every shard's copy
// reads and ForwardBackward updates once, at its end.
type Sequential struct {
	name    string
	input   Shape
	specs   []LayerSpec
	outs    []Shape // outs[i] is the output shape of specs[i]
	loss    lossKind
	classes int
	seed    int64
	fused   []int // the first spec of each fused stage
	vocab   int   // an Embedding's input_dim when it reads the input: ids are checked

	params, grads []float32
	bufs          bufferSet // BatchNormalization's moving statistics …
	tensors       []ParamTensor
	tensorSpec    []int // the spec each tensor belongs to
	shards        []*shard
	workers       bool            // shards 1.. have goroutines
	sync          *statsync.Point // synchronized batch normalization's (BatchNormSyncer)

	// Where the next training pass is in a run (SetStep); step advances
	// after each ForwardBackward.
	rank, epoch, step int

	// NotifyGrads's: the callback, each computing layer's first parameter,
	// and the lowest parameter whose gradient the shards have summed in
	// this pass.
	notify     func(lo int)
	layerOff   []int
	summedFrom int
}

// lossKind is the loss a Sequential ends in, chosen by its last layer.
type lossKind int

const (
	softmaxCE  lossKind = iota // softmax cross-entropy over the class scores
	sigmoidBCE                 // sigmoid binary cross-entropy of one score
)

// Stepper is a model whose training passes depend on where they are in a
// run: a Sequential with Dropout. SetStep tells it the replica's rank and
// the epoch and step (the batch's index in the epoch) of the next
// ForwardBackward, so that replicas draw different dropout masks and a
// resumed run draws those of an uninterrupted one. mirrored calls it
// before every step of a model that has it.
type Stepper interface {
	SetStep(rank, epoch, step int)
}

var (
	_ Model    = (*Sequential)(nil)
	_ Stepper  = (*Sequential)(nil)
	_ Stateful = (*Sequential)(nil)
)

// NewSequential returns a model that applies layers in turn to inputs of
// shape input, initialised from seed (the same seed, the same parameters,
// bit for bit) and splitting each batch into shards parts (0 for
// DefaultShards). Each layer's input shape is the previous layer's output
// shape; a shape a layer cannot take is an error naming the layer's index
// and kind.
//
// The last layer chooses the loss: Activation{"softmax"} makes the
// previous layer's outputs class scores for softmax cross-entropy,
// computed as one fused step; Activation{"sigmoid"} after a single output
// makes a binary classifier (labels 0 and 1) with sigmoid binary
// cross-entropy, fused the same way. Any other last layer (a Dense,
// Activation{"linear"} …) gives class scores (logits) for softmax
// cross-entropy, as if softmax followed. The class scores must be a vector
// of at least 2.
//
// Tensors names the parameters as torch.nn.Sequential does: "0.weight",
// "0.bias", "3.weight" …, numbered by the layer's position among all the
// layers (those without parameters count), unless the layer's Name gives
// the prefix ("conv1.weight"). A convolution followed by a ReLU and a 2×2
// max-pooling, in either order, runs as one fused layer (LeNet's stages);
// the result is the same to rounding.
func NewSequential(name string, input Shape, seed int64, shards int, layers ...LayerSpec) (*Sequential, error) {
	return newSequential(name, input, seed, shards, seqOptions{}, layers)
}

// seqOptions are the choices nn makes for its own models and tests.
type seqOptions struct {
	unfused bool // run conv → ReLU → max-pool as three layers
	bare    bool // tensors named weight and bias, without a prefix (one layer with parameters)
}

func newSequential(name string, input Shape, seed int64, nshards int, opt seqOptions, specs []LayerSpec) (*Sequential, error) {
	if nshards < 0 {
		return nil, fmt.Errorf("nn: %s: %d batch shards: want at least 1 (or 0 for %d)", name, nshards, DefaultShards)
	}
	if nshards == 0 {
		nshards = DefaultShards
	}
	if !input.valid() {
		return nil, fmt.Errorf("nn: %s: input shape %+v: want H, W, C ≥ 1 for an image or H = W = 0 and C ≥ 1 for a vector", name, input)
	}
	m := &Sequential{name: name, input: input, specs: slices.Clone(specs), seed: seed}
	proto, err := m.compile(!opt.unfused)
	if err != nil {
		return nil, err
	}
	var prefixes map[int]string
	if m.tensors, m.tensorSpec, prefixes, err = m.names(proto, opt.bare); err != nil {
		return nil, err
	}
	total := 0
	for _, l := range proto.layers {
		total += l.NumParams()
	}
	if total == 0 {
		return nil, fmt.Errorf("nn: %s: no layer has parameters", name)
	}
	m.params = make([]float32, total)
	for i := 0; i < nshards; i++ {
		c := proto
		if i > 0 {
			c, _ = m.compile(!opt.unfused)
		}
		s := &shard{compiled: c, grads: make([]float32, total)}
		for _, l := range c.layers {
			if t, ok := l.(modal); ok {
				s.modal = append(s.modal, t)
			}
		}
		if i == 0 {
			m.grads = s.grads
		}
		off := 0
		for _, l := range c.layers {
			np := l.NumParams()
			l.Bind(m.params[off:off+np:off+np], s.grads[off:off+np:off+np])
			off += np
		}
		m.shards = append(m.shards, s)
	}
	shardLayers := make([][]layer, len(m.shards))
	for i, s := range m.shards {
		shardLayers[i] = s.layers
	}
	m.bufs.bindAll(shardLayers, prefixes)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e6e2d696e6974)) // "nn-init"
	for _, l := range proto.layers {
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
	return m, nil
}

// compiled is one copy of a Sequential's layers: those that compute (a
// view, Flatten, Reshape or a linear activation, is none: the next layer
// reads its input, and a final softmax or sigmoid belongs to the loss), in
// order.
type compiled struct {
	layers   []layer
	spec     []int // the spec each layer computes (the first of a fused run)
	dropouts []*dropout
	dropSpec []int
	// layers[:len(chunkers)] run a chunk of examples at a time (see
	// chunker); none unless at least two can.
	chunkers []chunker
}

// chunkExamples is how many examples a chunk of a batch holds when a model
// runs its first layers a chunk at a time: LeNet's first convolution's
// output for 2 examples (38 KB) fits a core's L1 data cache (48 KB here),
// where the pooling after it reads it.
const chunkExamples = 2

// compile checks the specs and builds one copy of the layers; the first
// call also sets m's shapes, loss and classes.
func (m *Sequential) compile(fuse bool) (compiled, error) {
	var c compiled
	if len(m.specs) == 0 {
		return c, fmt.Errorf("nn: %s: no layers", m.name)
	}
	fail := func(i int, err error) (compiled, error) {
		return compiled{}, &LayerError{Model: m.name, Index: i, Kind: m.specs[i].kind(), Err: err}
	}
	outs := make([]Shape, len(m.specs))
	in := m.input
	n := len(m.specs)
	loss := softmaxCE
	if a, ok := m.specs[n-1].(Activation); ok && (a.Fn == "softmax" || a.Fn == "sigmoid") {
		n-- // the loss's
		if a.Fn == "sigmoid" {
			loss = sigmoidBCE
		}
	}
	for i := 0; i < len(m.specs); i++ {
		if m.specs[i] == nil {
			return compiled{}, &LayerError{Model: m.name, Index: i, Err: errors.New("a nil LayerSpec")}
		}
		l, out, err := m.specs[i].build(in)
		if err != nil {
			return fail(i, err)
		}
		outs[i] = out
		if i >= n {
			in = out
			continue
		}
		if fuse && i+2 < n {
			if f, ok := fusable(l, m.specs[i+1], m.specs[i+2], out); ok {
				outs[i+1], outs[i+2] = m.shapeAfter(i+1, out), f.outShape()
				c.layers, c.spec = append(c.layers, f), append(c.spec, i)
				in = outs[i+2]
				i += 2
				continue
			}
		}
		in = out
		if _, view := l.(*reshape); view {
			continue
		}
		if d, ok := l.(*dropout); ok {
			c.dropouts, c.dropSpec = append(c.dropouts, d), append(c.dropSpec, i)
		}
		c.layers, c.spec = append(c.layers, l), append(c.spec, i)
	}
	for i, l := range c.layers {
		if t, ok := l.(tokenReader); ok {
			if i > 0 {
				return fail(c.spec[i], errors.New("an Embedding takes token ids, the model's input: make it the first layer"))
			}
			m.vocab = t.vocab()
		}
	}
	for _, l := range c.layers {
		ch, ok := l.(chunker)
		if _, fused := l.(*convPoolReLU); !ok || fused {
			break
		}
		c.chunkers = append(c.chunkers, ch)
	}
	if len(c.chunkers) < 2 {
		c.chunkers = nil
	}
	last := m.input
	if n > 0 {
		last = outs[n-1]
	}
	classes := 0
	switch {
	case !last.vector():
		return fail(len(m.specs)-1, fmt.Errorf("the model ends in an image, %v: end with class scores (Flatten, then Dense)", last))
	case loss == sigmoidBCE && last.C != 1:
		return fail(len(m.specs)-1, fmt.Errorf("sigmoid after %d outputs: a binary model ends in 1 output and a sigmoid; for more classes end with softmax", last.C))
	case loss == sigmoidBCE:
		classes = 2
	case last.C < 2:
		return fail(len(m.specs)-1, fmt.Errorf("%d class score: want at least 2, or 1 output and a sigmoid for a binary model", last.C))
	default:
		classes = last.C
	}
	m.outs, m.loss, m.classes = outs, loss, classes
	if fuse {
		m.fused = m.fused[:0]
		for i, l := range c.layers {
			if _, ok := l.(*convPoolReLU); ok {
				m.fused = append(m.fused, c.spec[i])
			}
		}
	}
	return c, nil
}

// LayerError is NewSequential's error about one of its layers: the
// layer's index among them, its kind ("conv2d", "activation relu" …;
// empty for a nil LayerSpec) and why. A reader of another model format
// (package nn/keras) maps Index back to the layer it read.
type LayerError struct {
	Model string
	Index int
	Kind  string
	Err   error
}

func (e *LayerError) Error() string {
	if e.Kind == "" {
		return fmt.Sprintf("nn: %s: layer %d is %v", e.Model, e.Index, e.Err)
	}
	return fmt.Sprintf("nn: %s: layer %d (%s): %v", e.Model, e.Index, e.Kind, e.Err)
}

func (e *LayerError) Unwrap() error { return e.Err }

// shapeAfter is the output shape of spec i given its input shape.
func (m *Sequential) shapeAfter(i int, in Shape) Shape {
	_, out, _ := m.specs[i].build(in)
	return out
}

// outShape is the fused layer's output shape.
func (l *convPoolReLU) outShape() Shape { return Shape{H: l.ph, W: l.pw, C: l.OutC} }

// fusable returns conv as a fused layer when a and b are a ReLU and a 2×2
// max-pooling (in either order; they commute) that convPoolReLU computes:
// stride 1, an even output, windows side by side without padding.
func fusable(conv layer, a, b LayerSpec, out Shape) (*convPoolReLU, bool) {
	c, ok := conv.(*conv2D)
	if !ok || !c.plain() || out.H%2 != 0 || out.W%2 != 0 {
		return nil, false
	}
	relu := func(s LayerSpec) bool { r, ok := s.(Activation); return ok && r.Fn == "relu" }
	pool2 := func(s LayerSpec) bool {
		p, ok := s.(MaxPooling2D)
		if !ok {
			return false
		}
		l, _, err := p.build(out)
		return err == nil && l.(*pool2D).max2()
	}
	if !(relu(a) && pool2(b) || pool2(a) && relu(b)) {
		return nil, false
	}
	return newConvPoolReLU(c), true
}

// names names the parameter tensors (see NewSequential) and checks the
// layers' names; prefixes are the tensors' prefixes of the computing
// layers with buffers, by their index in c.layers.
func (m *Sequential) names(c compiled, bare bool) (tensors []ParamTensor, specOf []int, prefixes map[int]string, err error) {
	return nameTensors(m.name, m.specs, c.layers, c.spec, bare)
}

// nameTensors names the parameter tensors of layers, layers[i] computing
// specs[spec[i]], as torch.nn.Sequential does ("3.weight") unless the
// spec names its layer ("conv1.weight"), and checks the names;
// prefixes are the tensors' prefixes of the layers with buffers, by
// their index in layers. With bare, the one layer with parameters has
// tensors weight and bias.
func nameTensors(model string, specs []LayerSpec, layers []layer, spec []int, bare bool) (tensors []ParamTensor, specOf []int, prefixes map[int]string, err error) {
	seen := map[string]int{}
	prefixes = map[int]string{}
	off := 0
	for i, l := range layers {
		s, ok := l.(shaped)
		_, buf := l.(buffered)
		if !buf && (!ok || l.NumParams() == 0) {
			continue
		}
		k := spec[i]
		prefix := strconv.Itoa(k) + "."
		if n, ok := specs[k].(named); ok && n.name() != "" {
			if strings.Contains(n.name(), ".") {
				return nil, nil, nil, &LayerError{Model: model, Index: k, Kind: specs[k].kind(), Err: fmt.Errorf("name %q: a name cannot contain a dot", n.name())}
			}
			prefix = n.name() + "."
		}
		if j, dup := seen[prefix]; dup {
			return nil, nil, nil, &LayerError{Model: model, Index: k, Kind: specs[k].kind(), Err: fmt.Errorf("name %q is layer %d's too", strings.TrimSuffix(prefix, "."), j)}
		}
		seen[prefix] = k
		if bare {
			prefix = ""
		}
		if buf {
			prefixes[i] = prefix
		}
		if !ok || l.NumParams() == 0 {
			continue
		}
		pn := []string{"weight", "bias"}
		if n, ok := l.(paramNamer); ok {
			pn = n.paramNames()
		}
		for j, shape := range s.ParamShapes() {
			p := ParamTensor{Name: prefix + pn[j], Shape: shape, Offset: off}
			tensors, specOf = append(tensors, p), append(specOf, k)
			off += p.Size()
		}
	}
	if bare && len(seen) > 1 {
		panic("nn: bare tensor names for more than one layer")
	}
	return tensors, specOf, prefixes, nil
}

// paramNamer is a layer whose tensors are not PyTorch's weight and bias
// (BatchNormalization without γ or β).
type paramNamer interface{ paramNames() []string }

// shaped is a layer with parameters: their shapes, weights then biases,
// in PyTorch's layouts.
type shaped interface {
	ParamShapes() [][]int
}

// modal is a layer that works differently when training (see conv2D and
// dropout).
type modal interface{ setTrain(bool) }

func (m *Sequential) Name() string      { return m.name }
func (m *Sequential) InputDim() int     { return m.input.Size() }
func (m *Sequential) Classes() int      { return m.classes }
func (m *Sequential) Params() []float32 { return m.params }
func (m *Sequential) Grads() []float32  { return m.grads }

// Input is the shape of one example.
func (m *Sequential) Input() Shape { return m.input }

func (m *Sequential) Tensors() []ParamTensor { return copyTensors(m.tensors) }

// Buffers implements Stateful: the moving statistics of the
// BatchNormalization layers, in order.
func (m *Sequential) Buffers() []float32 { return m.bufs.buf }

// BufferTensors implements Stateful ("3.running_mean" …, prefixed as the
// layer's parameters are).
func (m *Sequential) BufferTensors() []ParamTensor { return copyTensors(m.bufs.tensors) }

// SetStep sets where the next ForwardBackward is in a run (see Stepper);
// each ForwardBackward then moves to the next step. Only Dropout depends on
// it. Without calls, the passes are steps 0, 1, 2 … of epoch 0 on rank 0.
func (m *Sequential) SetStep(rank, epoch, step int) {
	m.rank, m.epoch, m.step = rank, epoch, step
}

// Summary describes the model a line per layer: its index, kind, output
// shape and tensors, then which layers run fused.
func (m *Sequential) Summary() string {
	var b strings.Builder
	loss := "softmax cross-entropy"
	if m.loss == sigmoidBCE {
		loss = "sigmoid binary cross-entropy"
	}
	fmt.Fprintf(&b, "%s: %v → %d classes, %s, %d parameters\n", m.name, m.input, m.classes, loss, len(m.params))
	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "#\tlayer\toutput\ttensors")
	ti := 0
	for i, s := range m.specs {
		var ts []string
		for ; ti < len(m.tensors) && m.tensorSpec[ti] == i; ti++ {
			ts = append(ts, fmt.Sprintf("%s %v", m.tensors[ti].Name, m.tensors[ti].Shape))
		}
		fmt.Fprintf(w, "%d\t%s\t%v\t%s\n", i, s.kind(), m.outs[i], strings.Join(ts, ", "))
	}
	w.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		b.WriteString(strings.TrimRight(line, " \n"))
		if line != "" {
			b.WriteByte('\n')
		}
	}
	for _, f := range m.fused {
		fmt.Fprintf(&b, "layers %d–%d run as one fused layer\n", f, f+2)
	}
	return b.String()
}

// dispatch splits n examples over the shards (contiguous, sizes differing
// by at most one), runs them, and waits for all.
func (m *Sequential) dispatch(x []float32, labels []int32, n int, train bool, scale float32) {
	ns := len(m.shards)
	dim := m.InputDim()
	off := 0
	for i, s := range m.shards {
		c := n / ns
		if i < n%ns {
			c++
		}
		s.x, s.labels, s.n, s.train, s.scale = x[off*dim:(off+c)*dim], labels[off:off+c], c, train, scale
		s.kind, s.scores = m.loss, m.classes
		if m.loss == sigmoidBCE {
			s.scores = 1
		}
		if train {
			for j, d := range s.dropouts {
				d.setStep(dropoutKey(m.seed, s.dropSpec[j], m.rank, m.epoch, m.step), off)
			}
		}
		off += c
	}
	m.armNotify(train)
	// Synchronized shards meet inside the pass: each needs its goroutine.
	parallel := m.workers && (runtime.GOMAXPROCS(0) > 1 || m.sync != nil)
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

func (m *Sequential) check(x []float32, labels []int32, n int) error {
	if err := checkBatch(m.name, m.InputDim(), m.classes, x, labels, n); err != nil || m.vocab == 0 {
		return err
	}
	return checkIDs(m.name, m.vocab, m.InputDim(), x, n)
}

// checkBatch checks a batch of n examples of dim floats and labels in
// [0, classes) for a model's ForwardBackward and Evaluate.
func checkBatch(name string, dim, classes int, x []float32, labels []int32, n int) error {
	if n <= 0 {
		return fmt.Errorf("nn: %s: batch of %d examples: want at least 1", name, n)
	}
	if len(x) < n*dim || len(labels) < n {
		return fmt.Errorf("nn: %s: batch of %d needs %d inputs and %d labels, got %d and %d",
			name, n, n*dim, n, len(x), len(labels))
	}
	for i, y := range labels[:n] {
		if y < 0 || int(y) >= classes {
			return fmt.Errorf("nn: %s: label %d of example %d is outside [0, %d)", name, y, i, classes)
		}
	}
	return nil
}

func (m *Sequential) ForwardBackward(x []float32, labels []int32, n int) (float64, error) {
	if n > 0 || m.sync == nil {
		if err := m.check(x, labels, n); err != nil {
			return 0, err
		}
	}
	m.sync.Reset()
	m.dispatch(x, labels, n, true, 1/float32(max(n, 1)))
	m.step++
	if err := m.sync.Err(); err != nil {
		return 0, fmt.Errorf("nn: %s: %w", m.name, err)
	}
	m.bufs.commit()
	loss := m.shards[0].lossSum
	for _, s := range m.shards[1:] {
		loss += s.lossSum
		if s.onLayer != nil {
			for s.at >= 0 { // what shard 0 did not wait for
				s.at = <-s.passed
			}
		}
		addRows(m.grads, 0, s.grads, 0, 1, m.summedFrom)
	}
	return loss / float64(max(n, 1)), nil
}

// NotifyGrads implements GradNotifier: after each layer's backward pass
// (but the first layers', which run a few examples at a time; see
// chunker), the shards' gradients of that layer are summed (in shard
// order, as at the end of the pass) and ready is told they are final.
func (m *Sequential) NotifyGrads(ready func(lo int)) { m.notify = ready }

// GradPoints implements GradNotifier: the first parameter of each layer
// with parameters, from the last layer down to the first that does not run
// a chunk at a time.
func (m *Sequential) GradPoints() []int {
	m.offsets()
	var pts []int
	s := m.shards[0]
	for i := len(s.layers) - 1; i >= len(s.chunkers); i-- {
		if s.layers[i].NumParams() > 0 {
			pts = append(pts, m.layerOff[i])
		}
	}
	return pts
}

// offsets sets layerOff: each computing layer's first parameter.
func (m *Sequential) offsets() {
	if m.layerOff != nil {
		return
	}
	off := 0
	for _, l := range m.shards[0].layers {
		m.layerOff = append(m.layerOff, off)
		off += l.NumParams()
	}
}

// armNotify sets the shards' onLayer for a training pass (or clears it),
// and which gradient rows are left to sum at the end.
func (m *Sequential) armNotify(train bool) {
	m.summedFrom = len(m.grads)
	on := train && m.notify != nil
	if on {
		m.offsets()
	}
	for i, s := range m.shards {
		s.onLayer = nil
		if !on {
			continue
		}
		if i == 0 {
			s.onLayer = m.layerDone
			continue
		}
		if s.passed == nil {
			s.passed = make(chan int, len(s.layers)+1)
		}
		s.at = len(s.layers)
		s.onLayer = func(i int) { s.passed <- i }
	}
}

// layerDone is shard 0's onLayer: once every shard is past layer i, it
// sums their gradients of layer i's parameters into the model's and
// notifies.
func (m *Sequential) layerDone(i int) {
	if i < 0 {
		return
	}
	lo, hi := m.layerOff[i], m.summedFrom
	if lo >= hi {
		return // no parameters
	}
	for _, s := range m.shards[1:] {
		for s.at > i {
			s.at = <-s.passed
		}
		addRows(m.grads[lo:hi], 0, s.grads[lo:hi], 0, 1, hi-lo)
	}
	m.summedFrom = lo
	m.notify(lo)
	runtime.Gosched() // see run's chunks
}

// TrainCorrect is the number of the last ForwardBackward's examples whose
// largest score was their label's (TrainCounter), counted with the loss.
func (m *Sequential) TrainCorrect() int {
	c := 0
	for _, s := range m.shards {
		c += s.right
	}
	return c
}

// evalChunk bounds the examples per shard per pass in Evaluate, keeping
// its activation buffers near a training batch's.
const evalChunk = 256

func (m *Sequential) Evaluate(x []float32, labels []int32, n int) (float64, int, error) {
	if n == 0 {
		return 0, 0, nil
	}
	if err := m.check(x, labels, n); err != nil {
		return 0, 0, err
	}
	var loss float64
	correct := 0
	step := evalChunk * len(m.shards)
	dim := m.InputDim()
	for off := 0; off < n; off += step {
		c := min(step, n-off)
		m.dispatch(x[off*dim:], labels[off:], c, false, 0)
		for _, s := range m.shards {
			loss += s.lossSum
			correct += s.right
		}
	}
	return loss, correct, nil
}
