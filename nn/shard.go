package nn

import "runtime"

// shard is one part of a Sequential's batch (see DefaultShards): its own
// copy of the layers, activations and gradient buffer, run on its own
// goroutine (serve) or in turn.
type shard struct {
	compiled
	modal []modal // the layers that are modal
	grads []float32
	acts  [][]float32 // acts[i] is the output of layers[i]
	dacts [][]float32 // dacts[i] is the gradient at the output of layers[i] (see reserve)

	// The buffers of layer i that hold one chunk rather than the batch.
	chunkAct, chunkGrad []bool
	yf                  []float32 // float labels for sigmoidBCE
	capN                int       // examples the buffers hold
	kind                lossKind
	scores              int // class scores per example

	// The job: set by the caller before signalling start.
	x       []float32
	labels  []int32
	n       int
	train   bool
	scale   float32
	lossSum float64
	right   int
	keep    []float32 // if set, where the scores go (Predict)

	start, done chan struct{}
	syncing     bool // its batch normalizations are synchronized

	// While the model notifies (NotifyGrads): onLayer(i) is called once
	// layer i's backward is done (i ≥ the chunked layers), then onLayer(-1)
	// at the end of the pass. Shards 1.. post i to passed, which shard 0
	// reads (at) before it sums their gradients of a layer.
	onLayer func(i int)
	passed  chan int
	at      int
}

func (s *shard) serve() {
	for range s.start {
		s.run()
		s.done <- struct{}{}
	}
}

// reserve sizes the activation buffers for n examples (once, in warm-up).
//
// The gradients need only two buffers: layer i's Backward reads dacts[i]
// and writes dacts[i−1], which then nothing reads again, so dacts
// alternate between them. Between the chunked layers (see chunker) a
// gradient lives only while its chunk is computed, so those alternate
// between two buffers of a chunk; so does an activation that neither
// Backward around it reads (see reader), such as a convolution's output
// before a max-pooling. The smaller buffers keep a chunk's pass in cache.
func (s *shard) reserve(n int) {
	if n <= s.capN {
		return
	}
	split := len(s.chunkers)
	s.acts, s.dacts = s.acts[:0], s.dacts[:0]
	s.chunkAct, s.chunkGrad = s.chunkAct[:0], s.chunkGrad[:0]
	most, mostChunk := 0, 0
	for i, l := range s.layers {
		out := l.OutSize()
		byChunk := i < split-1 && !reads(l, false) && !reads(s.layers[i+1], true)
		size := n * out
		if byChunk {
			size = chunkExamples * out
		}
		s.acts = append(s.acts, make([]float32, size))
		s.chunkAct = append(s.chunkAct, byChunk)
		if i < split-1 {
			mostChunk = max(mostChunk, chunkExamples*out)
		} else {
			most = max(most, n*out)
		}
	}
	grads := [2][]float32{make([]float32, most), make([]float32, most)}
	chunkGrads := [2][]float32{make([]float32, mostChunk), make([]float32, mostChunk)}
	for i, l := range s.layers {
		byChunk := i < split-1
		g := grads[i%2][:min(n*l.OutSize(), most)]
		if byChunk {
			g = chunkGrads[i%2][:chunkExamples*l.OutSize()]
		}
		s.dacts = append(s.dacts, g)
		s.chunkGrad = append(s.chunkGrad, byChunk)
	}
	s.yf = make([]float32, n)
	s.capN = n
}

// reader is a layer whose Backward, in a chunked training pass (see
// chunker), reads only some of its Forward's buffers: x its input, y its
// output. A layer that is not a reader may read both.
type reader interface{ reads() (x, y bool) }

// reads reports whether l's Backward reads its input (x) or its output.
func reads(l layer, x bool) bool {
	r, ok := l.(reader)
	if !ok {
		return true
	}
	rx, ry := r.reads()
	if x {
		return rx
	}
	return ry
}

// act is layer i's output for the chunk from example first, and grad the
// gradient there.
func (s *shard) act(i, first int) []float32 {
	if s.chunkAct[i] {
		return s.acts[i]
	}
	return s.acts[i][first*s.layers[i].OutSize():]
}

func (s *shard) grad(i, first int) []float32 {
	if s.chunkGrad[i] {
		return s.dacts[i]
	}
	return s.dacts[i][first*s.layers[i].OutSize():]
}

// run does the shard's job: forward, loss, and for training backward into
// s.grads (which it zeroes first).
func (s *shard) run() {
	s.lossSum, s.right = 0, 0
	if s.train {
		clear(s.grads)
	}
	if s.onLayer != nil {
		defer s.onLayer(-1)
	}
	for _, t := range s.modal {
		t.setTrain(s.train)
	}
	if s.n == 0 {
		if s.train && s.syncing {
			syncIdle(s.layers, s.onLayer, len(s.chunkers))
		}
		return
	}
	s.reserve(s.n)
	split := len(s.chunkers)
	in := s.x
	if split > 0 {
		s.chunks(func(first, n int) {
			in := s.x[first*s.layers[0].InSize():]
			for i, l := range s.layers[:split] {
				s.chunkers[i].chunk(first, s.n)
				y := s.act(i, first)
				l.Forward(y, in, n)
				in = y
			}
		})
		in = s.acts[split-1]
	}
	for i := split; i < len(s.layers); i++ {
		s.layers[i].Forward(s.acts[i], in, s.n)
		in = s.acts[i]
	}
	last := len(s.layers) - 1
	var dl []float32
	if s.train {
		dl = s.dacts[last]
	}
	k := s.scores
	if s.keep != nil {
		copy(s.keep, in[:s.n*k])
	}
	if s.kind == sigmoidBCE {
		for i, y := range s.labels[:s.n] {
			s.yf[i] = float32(y)
		}
		s.lossSum, s.right = BinaryLogistic(in[:s.n], s.yf, s.n, dl, s.scale)
	} else {
		s.lossSum, s.right = SoftmaxCrossEntropy(in[:s.n*k], s.labels, s.n, k, dl, s.scale)
	}
	if !s.train {
		return
	}
	for i := last; i >= split; i-- {
		x := s.x
		var dx []float32
		if i > 0 {
			x = s.acts[i-1]
			dx = s.dacts[i-1]
		}
		s.layers[i].Backward(dx, s.dacts[i], x, s.acts[i], s.n)
		if s.onLayer != nil {
			s.onLayer(i)
		}
	}
	if split > 0 {
		s.chunks(func(first, n int) {
			if s.onLayer != nil {
				// An exchange started by a notification runs on this
				// goroutine's processor when GOMAXPROCS is 1: let it
				// send and fold what has arrived between chunks.
				runtime.Gosched()
			}
			for i := split - 1; i >= 0; i-- {
				l := s.layers[i]
				s.chunkers[i].chunk(first, s.n)
				var x, dx []float32
				if i > 0 {
					x, dx = s.act(i-1, first), s.grad(i-1, first)
				} else {
					x = s.x[first*l.InSize():]
				}
				l.Backward(dx, s.grad(i, first), x, s.act(i, first), n)
			}
		})
	}
}

// chunks calls f for each chunk of the shard's examples, in order.
func (s *shard) chunks(f func(first, n int)) {
	for first := 0; first < s.n; first += chunkExamples {
		f(first, min(chunkExamples, s.n-first))
	}
}
