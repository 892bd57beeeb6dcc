package nn

import (
	"fmt"
	"sort"
	"strings"
)

// MemoryPlan is what multiplies a model's sizes in a training process:
// the examples a step runs, the parts they are split into, and the
// copies of the parameters the optimizer and the run keep.
type MemoryPlan struct {
	// Batch is the examples of one step on this process (the per-peer
	// batch; an evaluation batch of the same size reuses the buffers).
	Batch int
	// Shards is how many parts the batch is split into (DefaultShards if
	// 0): each part has its own gradient buffer and activations.
	Shards int
	// OptimizerCopies is the optimizer's state in copies of the
	// parameters: 0 for plain SGD, 1 with momentum, 2 for Adam
	// (OptimizerCopies).
	OptimizerCopies int
	// Exchange is set when the gradient is exchanged with peers: the
	// all-reduce's send and receive frames and the gradient buckets hold
	// about two copies of it.
	Exchange bool
	// Commits is set for an elastic run: an in-memory copy of the
	// parameters and optimizer state at every commit.
	Commits bool
	// Checkpoints is set when the run writes or reads checkpoints: their
	// encoding holds the parameters and state twice (tensors, file).
	Checkpoints bool
}

// OptimizerCopies is the state an optimizer keeps, in copies of the
// parameters (see NewOptimizer).
func OptimizerCopies(name string, momentum float64) int {
	switch name {
	case Adam:
		return 2
	case Momentum, Nesterov:
		return 1
	case SGD:
		if momentum > 0 {
			return 1
		}
	}
	return 0
}

// MemoryTerm is one part of a Footprint.
type MemoryTerm struct {
	Name  string
	Bytes int64
}

// Footprint is the memory a training process of a model needs, by term,
// in bytes: an estimate made before anything is allocated, so that a
// model that cannot fit is refused with the figures instead of killing
// the Go runtime ("fatal error: out of memory") or the machine. It counts
// the model's buffers, not the data set, the runtime or the network.
type Footprint []MemoryTerm

// Total is the sum of the terms.
func (f Footprint) Total() int64 {
	var t int64
	for _, m := range f {
		t += m.Bytes
	}
	return t
}

// Largest is the largest term.
func (f Footprint) Largest() MemoryTerm {
	var l MemoryTerm
	for _, m := range f {
		if m.Bytes > l.Bytes {
			l = m
		}
	}
	return l
}

// String lists the terms, largest first.
func (f Footprint) String() string {
	s := append(Footprint(nil), f...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Bytes > s[j].Bytes })
	parts := make([]string, 0, len(s))
	for _, m := range s {
		if m.Bytes > 0 {
			parts = append(parts, m.Name+" "+Bytes(m.Bytes))
		}
	}
	return strings.Join(parts, ", ")
}

// Bytes writes n bytes in binary units (KiB, MiB, GiB), 3 figures.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, 0
	for v >= unit && u < 4 {
		v, u = v/unit, u+1
	}
	return fmt.Sprintf("%.3g %ciB", v, "KMGTP"[u])
}

// Footprint estimates the memory a training process of a needs under p
// (see Footprint). It walks the layers' shapes as Check does, without
// allocating them; a model Check refuses is refused here too.
//
// Per shard (one part of the batch, n examples): a gradient buffer of
// every parameter; every layer's output for n examples, and two buffers
// of the largest output for the gradients flowing back (shard.reserve);
// for a convolution, its padded input for n examples and one image's
// scratch (taps and filters by the padded plane). Per process: the
// parameters, the optimizer's state, and the copies p asks for.
func (a Architecture) Footprint(p MemoryPlan) (Footprint, error) {
	if _, _, err := a.Check(); err != nil {
		return nil, err
	}
	shards := p.Shards
	if shards <= 0 {
		shards = DefaultShards
	}
	n := int64((max(p.Batch, 1) + shards - 1) / shards) // examples a shard runs
	var params, outs, most, conv int64
	shapes := make([]Shape, len(a.Layers))
	in := a.Input
	for i, s := range a.Layers {
		if a.Inputs != nil {
			in = a.Input
			if j := a.Inputs[i][0]; j >= 0 {
				in = shapes[j]
			}
		}
		out, np, ok, err := boundOf(s, in)
		if err != nil || !ok {
			return nil, fmt.Errorf("nn: %s: layer %d: its shape cannot be inferred (%v)", a.Name, i, err)
		}
		params += int64(np)
		if !view(s) && !(i == len(a.Layers)-1 && lossActivation(s)) {
			size := int64(out.Size())
			outs += size
			most = max(most, size)
		}
		if c, ok := s.(Conv2D); ok {
			k, st := c.Kernel, max(c.Strides, 1)
			_, pt, pb, _ := window(in.H, k, st, c.Padding)
			_, pl, pr, _ := window(in.W, k, st, c.Padding)
			plane := int64(in.H+pt+pb) * int64(in.W+pl+pr)
			conv += n*plane*int64(in.C) + (int64(in.C*k*k)+int64(c.Filters)+2)*plane
		}
		shapes[i], in = out, out
	}
	acts := n * (outs + 2*most) // a graph's: every node's output, two gradient buffers
	if a.Inputs == nil {
		var err error
		if acts, err = a.chainActivations(n); err != nil {
			return nil, err
		}
	}
	const f32 = 4
	w := f32 * params
	state := int64(p.OptimizerCopies) * w
	f := Footprint{
		{"parameters", w},
		{fmt.Sprintf("gradients (%d shards)", shards), int64(shards) * w},
		{"optimizer state", state},
		{fmt.Sprintf("activations and their gradients (%d examples × %d shards)", n, shards), int64(shards) * f32 * acts},
		{"convolution scratch", int64(shards) * f32 * conv},
		{"input batches (this one and the next)", 2 * f32 * int64(max(p.Batch, 1)) * int64(a.Input.Size())},
	}
	if p.Exchange {
		f = append(f, MemoryTerm{"exchange and bucket buffers", 2 * w})
	}
	if p.Commits {
		f = append(f, MemoryTerm{"elastic commits", w + state})
	}
	if p.Checkpoints {
		f = append(f, MemoryTerm{"checkpoint encoding", 2 * (w + state)})
	}
	return f, nil
}

// chainActivations is the floats a shard of a chain holds for n examples:
// the buffers shard.reserve sizes, for the layers compile builds (fused,
// views dropped; the first layers a chunk of examples at a time).
func (a Architecture) chainActivations(n int64) (int64, error) {
	m := &Sequential{name: a.Name, input: a.Input, specs: a.Layers}
	c, err := m.compile(true)
	if err != nil {
		return 0, err
	}
	split := len(c.chunkers)
	var acts, most, mostChunk int64
	for i, l := range c.layers {
		out := int64(l.OutSize())
		if i < split-1 && !reads(l, false) && !reads(c.layers[i+1], true) {
			acts += chunkExamples * out
		} else {
			acts += n * out
		}
		if i < split-1 {
			mostChunk = max(mostChunk, chunkExamples*out)
		} else {
			most = max(most, n*out)
		}
	}
	return acts + 2*most + 2*mostChunk, nil
}

// view says a layer's output is its input's buffer, reshaped: it holds
// no activations of its own.
func view(s LayerSpec) bool {
	switch s.(type) {
	case Flatten, Reshape:
		return true
	}
	return false
}

// lossActivation says s, as the last layer, is the loss's own (a softmax
// or sigmoid computed with the cross-entropy, with no buffer).
func lossActivation(s LayerSpec) bool {
	a, ok := s.(Activation)
	return ok && (a.Fn == "softmax" || a.Fn == "sigmoid")
}

// BuiltinArchitecture is the architecture of a model NewModelFor builds
// by name, for spec: what Footprint needs to estimate it.
func BuiltinArchitecture(name string, spec Spec) (Architecture, error) {
	switch name {
	case LeNet5:
		return Architecture{Name: name, Input: Shape{H: 28, W: 28, C: 1}, Layers: lenetLayers(spec.Classes)}, nil
	case Softmax:
		return Architecture{Name: name, Input: Shape{H: spec.Rows, W: spec.Cols, C: 1}, Layers: softmaxLayers(spec.Classes)}, nil
	}
	return Architecture{}, fmt.Errorf("nn: unknown model %q: want one of %v", name, ModelNames)
}
