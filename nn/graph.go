package nn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"

	"github.com/meshtrain/meshtrain/nn/statsync"
)

// Node is one node of a Graph: a layer and the nodes whose outputs it
// takes, by their index among the graph's nodes (earlier nodes only),
// −1 standing for the model's input. A layer of one input (Conv2D,
// BatchNormalization …) takes one; Add takes two or more.
type Node struct {
	Layer  LayerSpec
	Inputs []int
}

// Graph is a classifier whose layers form a directed acyclic graph, such
// as a residual network: each node takes the outputs of earlier nodes
// (or the input), every node's output is taken by a later one, and the
// last node's output gives the loss as a Sequential's last layer does (a
// softmax or sigmoid Activation there is fused with its cross-entropy).
// A chain is one case: a Graph whose nodes each take the one before
// computes what the Sequential of the same layers computes, to rounding
// (a Sequential also fuses conv → ReLU → max-pool and runs its first
// layers a few examples at a time, which a Graph does not).
//
// It is a Model and Stateful, and a Stepper for its Dropout layers, with
// the Sequential's contract: one flat parameter vector, gradients summed
// over shards in shard order, buffers updated once per training step,
// ForwardBackward a training pass and Evaluate an inference pass. Its
// tensors are named by node index ("3.weight") or by the layer's Name.
type Graph struct {
	name    string
	input   Shape
	specs   []LayerSpec
	inputs  [][]int
	outs    []Shape
	loss    lossKind
	classes int
	seed    int64
	nc      int // the nodes computed (all but a final softmax or sigmoid)
	scores  int // the node whose output is the class scores
	vocab   int // the least input_dim of the Embeddings (on the input): ids are checked

	params, grads []float32
	bufs          bufferSet
	tensors       []ParamTensor
	shards        []*graphShard
	workers       bool
	sync          *statsync.Point // synchronized batch normalization's (BatchNormSyncer)

	rank, epoch, step int
}

var (
	_ Model    = (*Graph)(nil)
	_ Stateful = (*Graph)(nil)
	_ Stepper  = (*Graph)(nil)
)

// NewGraph returns the graph of nodes on inputs of shape input,
// initialised from seed in node order (the same seed, the same
// parameters, bit for bit) and splitting each batch into shards parts (0
// for DefaultShards). An error about a node is a *LayerError with its
// index.
func NewGraph(name string, input Shape, seed int64, shards int, nodes ...Node) (*Graph, error) {
	if shards < 0 {
		return nil, fmt.Errorf("nn: %s: %d batch shards: want at least 1 (or 0 for %d)", name, shards, DefaultShards)
	}
	if shards == 0 {
		shards = DefaultShards
	}
	g := newGraph(name, input, nodes)
	proto, err := g.compile()
	if err != nil {
		return nil, err
	}
	layers, specOf := proto.paramLayers()
	var prefixes map[int]string
	if g.tensors, _, prefixes, err = nameTensors(g.name, g.specs, layers, specOf, false); err != nil {
		return nil, err
	}
	total := 0
	for _, l := range layers {
		total += l.NumParams()
	}
	if total == 0 {
		return nil, fmt.Errorf("nn: %s: no layer has parameters", name)
	}
	g.params = make([]float32, total)
	shardLayers := make([][]layer, shards)
	for i := 0; i < shards; i++ {
		s := proto
		if i > 0 {
			s, _ = g.compile()
		}
		s.grads = make([]float32, total)
		if i == 0 {
			g.grads = s.grads
		}
		ls, _ := s.paramLayers()
		off := 0
		for _, l := range ls {
			np := l.NumParams()
			l.Bind(g.params[off:off+np:off+np], s.grads[off:off+np:off+np])
			off += np
		}
		shardLayers[i] = ls
		g.shards = append(g.shards, s)
	}
	g.bufs.bindAll(shardLayers, prefixes)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e6e2d696e6974)) // "nn-init", as a Sequential's
	for _, l := range layers {
		l.Init(rng)
	}
	if shards > 1 {
		g.workers = true
		chans := make([]chan struct{}, 0, shards-1)
		for _, s := range g.shards[1:] {
			s.start, s.done = make(chan struct{}), make(chan struct{})
			chans = append(chans, s.start)
			go s.serve()
		}
		runtime.AddCleanup(g, func(cs []chan struct{}) {
			for _, c := range cs {
				close(c)
			}
		}, chans)
	}
	g.seed = seed
	return g, nil
}

// newGraph is a graph of nodes before compile.
func newGraph(name string, input Shape, nodes []Node) *Graph {
	g := &Graph{name: name, input: input}
	for _, n := range nodes {
		g.specs = append(g.specs, n.Layer)
		g.inputs = append(g.inputs, slices.Clone(n.Inputs))
	}
	return g
}

// compile checks the nodes and builds one shard's copy of their layers;
// the first call also sets g's shapes, loss and classes.
func (g *Graph) compile() (*graphShard, error) {
	if !g.input.valid() {
		return nil, fmt.Errorf("nn: %s: input shape %+v: want H, W, C ≥ 1 for an image or H = W = 0 and C ≥ 1 for a vector", g.name, g.input)
	}
	n := len(g.specs)
	if n == 0 {
		return nil, fmt.Errorf("nn: %s: no layers", g.name)
	}
	fail := func(i int, err error) (*graphShard, error) {
		kind := ""
		if g.specs[i] != nil {
			kind = g.specs[i].kind()
		}
		return nil, &LayerError{Model: g.name, Index: i, Kind: kind, Err: err}
	}
	s := &graphShard{g: g, layers: make([]layer, n), joins: make([]joiner, n)}
	outs := make([]Shape, n)
	used := make([]bool, n)
	nc, loss := n, softmaxCE
	if a, ok := g.specs[n-1].(Activation); ok && (a.Fn == "softmax" || a.Fn == "sigmoid") {
		nc = n - 1 // the loss's
		if a.Fn == "sigmoid" {
			loss = sigmoidBCE
		}
	}
	for i, spec := range g.specs {
		if spec == nil {
			return fail(i, errors.New("a nil LayerSpec"))
		}
		ins := g.inputs[i]
		if len(ins) == 0 {
			return fail(i, errors.New("no inputs: a node takes the model's input (−1) or earlier nodes"))
		}
		shapes := make([]Shape, len(ins))
		for k, j := range ins {
			if j < -1 || j >= i {
				return fail(i, fmt.Errorf("input %d: want −1 (the model's input) or an earlier node, 0 to %d", j, i-1))
			}
			shapes[k] = g.input
			if j >= 0 {
				shapes[k] = outs[j]
				used[j] = true
			}
		}
		if js, ok := spec.(joinSpec); ok {
			l, out, err := js.buildJoin(shapes)
			if err != nil {
				return fail(i, err)
			}
			s.joins[i], outs[i] = l, out
			continue
		}
		if len(ins) != 1 {
			return fail(i, fmt.Errorf("%d inputs: the layer takes one", len(ins)))
		}
		l, out, err := spec.build(shapes[0])
		if err != nil {
			return fail(i, err)
		}
		if t, ok := l.(tokenReader); ok {
			if ins[0] != -1 {
				return fail(i, errors.New("an Embedding takes token ids, the model's input (−1)"))
			}
			if g.vocab == 0 || t.vocab() < g.vocab {
				g.vocab = t.vocab()
			}
		}
		if i < nc {
			s.layers[i] = l
		}
		outs[i] = out
	}
	for i := 0; i < n-1; i++ {
		if !used[i] {
			return fail(i, errors.New("no later node takes its output: the graph's output is its last node's"))
		}
	}
	scores := n - 1
	if nc < n {
		scores = g.inputs[n-1][0]
		if len(g.inputs[n-1]) != 1 || scores != n-2 {
			return fail(n-1, errors.New("the final softmax or sigmoid must take the node before it"))
		}
	}
	last := g.input
	if scores >= 0 {
		last = outs[scores]
	}
	classes := 0
	switch {
	case !last.vector():
		return fail(n-1, fmt.Errorf("the model ends in an image, %v: end with class scores (Flatten, then Dense)", last))
	case loss == sigmoidBCE && last.C != 1:
		return fail(n-1, fmt.Errorf("sigmoid after %d outputs: a binary model ends in 1 output and a sigmoid; for more classes end with softmax", last.C))
	case loss == sigmoidBCE:
		classes = 2
	case last.C < 2:
		return fail(n-1, fmt.Errorf("%d class score: want at least 2, or 1 output and a sigmoid for a binary model", last.C))
	default:
		classes = last.C
	}
	g.outs, g.loss, g.classes, g.nc, g.scores = outs, loss, classes, nc, scores
	// A convolution that only batch normalizations take gets a dense
	// output gradient (theirs): listing it for the sparse weight gradient
	// (see conv2D's sparse) would be wasted.
	normed := slices.Repeat([]bool{true}, n)
	for i, ins := range g.inputs {
		_, bn := g.specs[i].(BatchNormalization)
		for _, j := range ins {
			if j >= 0 && !bn {
				normed[j] = false
			}
		}
	}
	for i, l := range s.layers {
		if c, ok := l.(*conv2D); ok && normed[i] && used[i] {
			c.sparse = false
			if !c.useWino() {
				c.useFull()
			}
		}
	}
	for i, l := range s.layers {
		if m, ok := l.(modal); ok {
			s.modal = append(s.modal, m)
		}
		if d, ok := l.(*dropout); ok {
			s.dropouts, s.dropNode = append(s.dropouts, d), append(s.dropNode, i)
		}
	}
	return s, nil
}

// check returns the parameter count of g's nodes without allocating
// the model: Architecture.Check's for a graph.
func (g *Graph) check() (params int, err error) {
	s, err := g.compile()
	if err != nil {
		return 0, err
	}
	layers, specOf := s.paramLayers()
	if _, _, _, err := nameTensors(g.name, g.specs, layers, specOf, false); err != nil {
		return 0, err
	}
	for _, l := range layers {
		params += l.NumParams()
	}
	if params == 0 {
		return 0, fmt.Errorf("nn: %s: no layer has parameters", g.name)
	}
	return params, nil
}

func (g *Graph) Name() string                 { return g.name }
func (g *Graph) InputDim() int                { return g.input.Size() }
func (g *Graph) Classes() int                 { return g.classes }
func (g *Graph) Params() []float32            { return g.params }
func (g *Graph) Grads() []float32             { return g.grads }
func (g *Graph) Tensors() []ParamTensor       { return copyTensors(g.tensors) }
func (g *Graph) Buffers() []float32           { return g.bufs.buf }
func (g *Graph) BufferTensors() []ParamTensor { return copyTensors(g.bufs.tensors) }

// Input is the shape of one example.
func (g *Graph) Input() Shape { return g.input }

// SetStep sets where the next ForwardBackward is in a run (see Stepper).
func (g *Graph) SetStep(rank, epoch, step int) { g.rank, g.epoch, g.step = rank, epoch, step }

// Architecture returns the definition g was built from: its layers and
// their inputs (Architecture.Inputs).
func (g *Graph) Architecture() Architecture {
	in := make([][]int, len(g.inputs))
	for i, x := range g.inputs {
		in[i] = slices.Clone(x)
	}
	return Architecture{Name: g.name, Input: g.input, Layers: slices.Clone(g.specs), Inputs: in}
}

// dispatch splits n examples over the shards as a Sequential does, runs
// them, and waits for all.
func (g *Graph) dispatch(x []float32, labels []int32, n int, train bool, scale float32) {
	ns := len(g.shards)
	dim := g.InputDim()
	off := 0
	for i, s := range g.shards {
		c := n / ns
		if i < n%ns {
			c++
		}
		s.x, s.labels, s.n, s.train, s.scale = x[off*dim:(off+c)*dim], labels[off:off+c], c, train, scale
		if train {
			for j, d := range s.dropouts {
				d.setStep(dropoutKey(g.seed, s.dropNode[j], g.rank, g.epoch, g.step), off)
			}
		}
		off += c
	}
	// Synchronized shards meet inside the pass: each needs its goroutine.
	parallel := g.workers && (runtime.GOMAXPROCS(0) > 1 || g.sync != nil)
	if parallel {
		for _, s := range g.shards[1:] {
			s.start <- struct{}{}
		}
	} else {
		for _, s := range g.shards[1:] {
			s.run()
		}
	}
	g.shards[0].run()
	if parallel {
		for _, s := range g.shards[1:] {
			<-s.done
		}
	}
}

func (g *Graph) checkBatch(x []float32, labels []int32, n int) error {
	if err := checkBatch(g.name, g.InputDim(), g.classes, x, labels, n); err != nil || g.vocab == 0 {
		return err
	}
	return checkIDs(g.name, g.vocab, g.InputDim(), x, n)
}

func (g *Graph) ForwardBackward(x []float32, labels []int32, n int) (float64, error) {
	if n > 0 || g.sync == nil {
		if err := g.checkBatch(x, labels, n); err != nil {
			return 0, err
		}
	}
	g.sync.Reset()
	g.dispatch(x, labels, n, true, 1/float32(max(n, 1)))
	g.step++
	if err := g.sync.Err(); err != nil {
		return 0, fmt.Errorf("nn: %s: %w", g.name, err)
	}
	g.bufs.commit()
	loss := g.shards[0].lossSum
	for _, s := range g.shards[1:] {
		loss += s.lossSum
		addRows(g.grads, 0, s.grads, 0, 1, len(g.grads))
	}
	return loss / float64(max(n, 1)), nil
}

// TrainCorrect is as Sequential's.
func (g *Graph) TrainCorrect() int {
	c := 0
	for _, s := range g.shards {
		c += s.right
	}
	return c
}

func (g *Graph) Evaluate(x []float32, labels []int32, n int) (float64, int, error) {
	if n == 0 {
		return 0, 0, nil
	}
	if err := g.checkBatch(x, labels, n); err != nil {
		return 0, 0, err
	}
	var loss float64
	correct := 0
	step := evalChunk * len(g.shards)
	dim := g.InputDim()
	for off := 0; off < n; off += step {
		c := min(step, n-off)
		g.dispatch(x[off*dim:], labels[off:], c, false, 0)
		for _, s := range g.shards {
			loss += s.lossSum
			correct += s.right
		}
	}
	return loss, correct, nil
}
