package nn

// Stateful is a Model with non-trainable buffers: state a training pass
// updates other than through the gradient, such as BatchNormalization's
// moving statistics. Like the parameters, the buffers live in one flat
// float32 vector, so a data-parallel trainer checkpoints, compares and
// broadcasts them in one piece (as DDP's broadcast_buffers does), and
// names them as PyTorch's state_dict names buffers ("3.running_mean",
// "3.running_var").
//
// Buffers changes only in ForwardBackward (a training pass), once per
// call, after the backward pass, from the statistics of the whole batch
// combined from the model's shards in shard order: a deterministic
// function of the parameters, the buffers and the batch, whatever
// GOMAXPROCS is. Evaluate reads them and writes nothing. A model without
// buffers returns an empty vector. Writing into Buffers() (a view)
// restores them, as Params() restores the parameters.
type Stateful interface {
	// Buffers is the flat buffer vector (a view).
	Buffers() []float32
	// BufferTensors names the tensors in Buffers, in order, as
	// Model.Tensors names the parameters.
	BufferTensors() []ParamTensor
}

// buffered is a layer with buffers. A model binds every shard's copy of
// the layer to the same view of its buffer vector; the copies only read
// it (in evaluation), and commit, called once per training pass on one
// copy, writes it.
type buffered interface {
	// NumBuffers is the number of floats the layer's buffers take.
	NumBuffers() int
	// BindBuffers points the layer's buffers at buf, of NumBuffers floats.
	BindBuffers(buf []float32)
	// InitBuffers sets the bound buffers to their initial values.
	InitBuffers()
	// BufferTensors are the buffers' names (without the layer's prefix)
	// and shapes, in order.
	BufferTensors() []ParamTensor
	// commit folds the statistics of a training pass into the bound
	// buffers: parts are the layer's copies in every shard, in shard
	// order, each holding its part of the batch's statistics.
	commit(parts []buffered)
}

// bufferSet is a model's buffered layers: each one's copies in every
// shard (in shard order), bound to the flat vector buf.
type bufferSet struct {
	buf     []float32
	tensors []ParamTensor
	groups  [][]buffered
	// prefixes are the groups' tensor prefixes ("3."), for errors.
	prefixes []string
}

// bind binds group (one layer's copies, shard by shard) to the next
// NumBuffers floats of s.buf and names them with prefix; call it for the
// layers in order after sizing s.buf.
func (s *bufferSet) bind(group []buffered, off int, prefix string) int {
	nb := group[0].NumBuffers()
	for _, l := range group {
		l.BindBuffers(s.buf[off : off+nb : off+nb])
	}
	group[0].InitBuffers()
	o := off
	for _, t := range group[0].BufferTensors() {
		t.Name, t.Offset = prefix+t.Name, o
		s.tensors = append(s.tensors, t)
		o += t.Size()
	}
	s.groups, s.prefixes = append(s.groups, group), append(s.prefixes, prefix)
	return off + nb
}

// bindAll sizes s.buf for the layers with buffers among shards[0] and
// binds every shard's copy of each (shards[j][i] is shard j's copy of
// layer i) to its view, layer by layer, named with prefixes[i].
func (s *bufferSet) bindAll(shards [][]layer, prefixes map[int]string) {
	total := 0
	for _, l := range shards[0] {
		if b, ok := l.(buffered); ok {
			total += b.NumBuffers()
		}
	}
	s.buf = make([]float32, total)
	off := 0
	for i, l := range shards[0] {
		if _, ok := l.(buffered); !ok {
			continue
		}
		group := make([]buffered, len(shards))
		for j, layers := range shards {
			group[j] = layers[i].(buffered)
		}
		off = s.bind(group, off, prefixes[i])
	}
}

// commit folds a training pass into the buffers, layer by layer.
func (s *bufferSet) commit() {
	for _, g := range s.groups {
		g[0].commit(g)
	}
}

// copyTensors returns a deep copy of ts.
func copyTensors(ts []ParamTensor) []ParamTensor {
	out := make([]ParamTensor, len(ts))
	for i, p := range ts {
		out[i] = ParamTensor{Name: p.Name, Shape: append([]int(nil), p.Shape...), Offset: p.Offset}
	}
	return out
}
