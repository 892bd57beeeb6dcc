package nn

// graphShard is one part of a Graph's batch: its own copy of the nodes'
// layers, activations and gradient buffer (see Sequential's shard).
type graphShard struct {
	g      *Graph
	layers []layer  // by node; nil for a joiner and the final loss activation
	joins  []joiner // by node; nil for a layer of one input

	modal    []modal
	dropouts []*dropout
	dropNode []int // the node of each dropout
	grads    []float32

	acts, dacts [][]float32 // by node: its output and the gradient there
	ins, dins   [][][]float32
	scratch     [][]float32 // by input slot: a gradient to add (see into)
	direct      []bool      // by input slot: into gave the node's own buffer
	reached     []bool      // by node: a gradient has reached its buffer
	yf          []float32
	capN        int

	// The job, as a Sequential's shard's.
	x       []float32
	labels  []int32
	n       int
	train   bool
	scale   float32
	lossSum float64
	right   int
	keep    []float32 // if set, where the scores go (Predict)

	start, done chan struct{}
}

func (s *graphShard) serve() {
	for range s.start {
		s.run()
		s.done <- struct{}{}
	}
}

// paramLayers are the shard's layers (not joiners), in node order, and
// the node of each: those that may have parameters and buffers.
func (s *graphShard) paramLayers() ([]layer, []int) {
	var ls []layer
	var nodes []int
	for i, l := range s.layers {
		if l != nil {
			ls, nodes = append(ls, l), append(nodes, i)
		}
	}
	return ls, nodes
}

// outSize is node i's floats per example.
func (s *graphShard) outSize(i int) int { return s.g.outs[i].Size() }

// reserve sizes the buffers for n examples (once, in warm-up).
func (s *graphShard) reserve(n int) {
	if n <= s.capN {
		return
	}
	g := s.g
	s.acts, s.dacts = make([][]float32, g.nc), make([][]float32, g.nc)
	s.ins, s.dins = make([][][]float32, g.nc), make([][][]float32, g.nc)
	most, slots := 0, 0
	for i := 0; i < g.nc; i++ {
		s.acts[i] = make([]float32, n*s.outSize(i))
		s.dacts[i] = make([]float32, n*s.outSize(i))
		s.ins[i] = make([][]float32, len(g.inputs[i]))
		s.dins[i] = make([][]float32, len(g.inputs[i]))
		slots = max(slots, len(g.inputs[i]))
		for _, j := range g.inputs[i] {
			if j >= 0 {
				most = max(most, n*s.outSize(j))
			}
		}
	}
	s.scratch = make([][]float32, slots)
	for k := range s.scratch {
		s.scratch[k] = make([]float32, most)
	}
	s.direct, s.reached = make([]bool, slots), make([]bool, g.nc)
	s.yf = make([]float32, n)
	s.capN = n
}

// in is node j's output, or the shard's input for −1.
func (s *graphShard) in(j int) []float32 {
	if j < 0 {
		return s.x
	}
	return s.acts[j]
}

// into is where the gradient of a node's input slot k, node j, goes: j's
// own buffer when nothing has reached it yet, else scratch k, which
// addInto then adds to it; nil for the model's input.
func (s *graphShard) into(j, k int) []float32 {
	if j < 0 {
		return nil
	}
	size := s.n * s.outSize(j)
	if !s.reached[j] {
		s.reached[j], s.direct[k] = true, true
		return s.dacts[j][:size]
	}
	s.direct[k] = false
	return s.scratch[k][:size]
}

func (s *graphShard) addInto(j, k int) {
	if j < 0 || s.direct[k] {
		return
	}
	d := s.dacts[j][:s.n*s.outSize(j)]
	addRows(d, 0, s.scratch[k][:len(d)], 0, 1, len(d)) // the AVX2 adds: the same sums

}

// run does the shard's job: forward, loss, and for training backward into
// s.grads (which it zeroes first), from the last node to the first, each
// node's gradient the sum of what its consumers sent it, in node order.
func (s *graphShard) run() {
	g := s.g
	s.lossSum, s.right = 0, 0
	if s.train {
		clear(s.grads)
	}
	for _, t := range s.modal {
		t.setTrain(s.train)
	}
	if s.n == 0 {
		if s.train && g.sync != nil {
			syncIdle(s.layers, nil, 0)
		}
		return
	}
	s.reserve(s.n)
	for i := 0; i < g.nc; i++ {
		if j := s.joins[i]; j != nil {
			xs := s.ins[i]
			for k, src := range g.inputs[i] {
				xs[k] = s.in(src)
			}
			j.forwardJoin(s.acts[i], xs, s.n)
			continue
		}
		s.layers[i].Forward(s.acts[i], s.in(g.inputs[i][0]), s.n)
	}
	scores := s.in(g.scores)
	if s.keep != nil {
		copy(s.keep, scores[:len(s.keep)])
	}
	var dl []float32
	if s.train && g.scores >= 0 {
		dl = s.dacts[g.scores]
	}
	if g.loss == sigmoidBCE {
		for i, y := range s.labels[:s.n] {
			s.yf[i] = float32(y)
		}
		s.lossSum, s.right = BinaryLogistic(scores[:s.n], s.yf, s.n, dl, s.scale)
	} else {
		k := g.classes
		s.lossSum, s.right = SoftmaxCrossEntropy(scores[:s.n*k], s.labels, s.n, k, dl, s.scale)
	}
	if !s.train {
		return
	}
	clear(s.reached)
	if g.scores >= 0 {
		s.reached[g.scores] = true
	}
	for i := g.nc - 1; i >= 0; i-- {
		dy := s.dacts[i]
		if j := s.joins[i]; j != nil {
			dxs := s.dins[i]
			for k, src := range g.inputs[i] {
				dxs[k] = s.into(src, k)
			}
			j.backwardJoin(dxs, dy, s.ins[i], s.acts[i], s.n)
			for k, src := range g.inputs[i] {
				s.addInto(src, k)
			}
			continue
		}
		src := g.inputs[i][0]
		s.layers[i].Backward(s.into(src, 0), dy, s.in(src), s.acts[i], s.n)
		s.addInto(src, 0)
	}
}
