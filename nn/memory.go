package nn

import "fmt"

// Buffers is what a training shard of a model holds for n examples, in
// floats, counted before anything is allocated (nn/footprint turns it
// into bytes and a limit): the parameters (and so each copy of them: a
// gradient, an optimizer's state); the activations and the gradients
// flowing back, as shard.reserve sizes them (fused layers, views
// dropped, the first layers a chunk at a time; a graph's every node and
// two gradient buffers of the largest); each convolution's padded input
// for n examples and its per-image scratch; one input batch.
type Buffers struct {
	Params, Activations, Scratch, Input int64
}

// Buffers walks a's layers for a shard of n examples (see Buffers). A
// model Check refuses is refused here too.
func (a Architecture) Buffers(n int) (Buffers, error) {
	if _, _, err := a.Check(); err != nil {
		return Buffers{}, err
	}
	b := Buffers{Input: int64(n) * int64(a.Input.Size())}
	var outs, most int64
	shapes := make([]Shape, len(a.Layers))
	in := a.Input
	for i, s := range a.Layers {
		var out Shape
		var params int
		var ok bool
		var err error
		if a.Inputs != nil { // a graph's node: in is its first input's shape
			if in = a.Input; a.Inputs[i][0] >= 0 {
				in = shapes[a.Inputs[i][0]]
			}
			out, params, ok, err = a.nodeBound(i, shapes)
		} else {
			out, params, ok, err = boundOf(s, in)
		}
		if err != nil || !ok {
			return Buffers{}, fmt.Errorf("nn: %s: layer %d: its shape cannot be inferred (%v)", a.Name, i, err)
		}
		b.Params += int64(params)
		if _, view := s.(Reshape); !view && !isFlatten(s) && !(i == len(a.Layers)-1 && lossActivation(s)) {
			outs, most = outs+int64(out.Size()), max(most, int64(out.Size()))
		}
		if sc, ok := s.(scratcher); ok {
			b.Scratch += sc.scratch(in, n)
		}
		if c, ok := s.(Conv1D); ok { // the unrolled input, its gradient, the weights transposed
			taps := int64(in.C) * int64(c.Kernel)
			b.Scratch += 2*taps*int64(out.W) + taps*int64(c.Filters)
		}
		shapes[i], in = out, out
	}
	b.Activations = int64(n) * (outs + 2*most)
	if a.Inputs != nil {
		return b, nil
	}
	c, err := (&Sequential{name: a.Name, input: a.Input, specs: a.Layers}).compile(true)
	if err != nil {
		return Buffers{}, err
	}
	split, mostChunk := len(c.chunkers), int64(0)
	outs, most = 0, 0
	for i, l := range c.layers {
		out := int64(l.OutSize())
		if i < split-1 && !reads(l, false) && !reads(c.layers[i+1], true) {
			outs += chunkExamples * out
		} else {
			outs += int64(n) * out
		}
		if i < split-1 {
			mostChunk = max(mostChunk, chunkExamples*out)
		} else {
			most = max(most, int64(n)*out)
		}
	}
	b.Activations = outs + 2*most + 2*mostChunk
	return b, nil
}

func isFlatten(s LayerSpec) bool { _, ok := s.(Flatten); return ok }

// lossActivation says s, as the last layer, is the loss's own (a softmax
// or sigmoid computed with the cross-entropy, with no buffer).
func lossActivation(s LayerSpec) bool {
	a, ok := s.(Activation)
	return ok && (a.Fn == "softmax" || a.Fn == "sigmoid")
}

// scratcher is a spec whose layer holds scratch beyond its output:
// scratch is how many floats, for a shard of n examples of shape in.
type scratcher interface {
	scratch(in Shape, n int) int64
}

// scratch: a convolution's padded input for n examples and its
// per-image scratch (taps and output channels times the padded plane).
func (c Conv2D) scratch(in Shape, n int) int64 {
	k := c.kernel()
	_, _, pad, _ := k.place(in, c.Padding)
	plane := int64(in.H+pad[0]+pad[1]) * int64(in.W+pad[2]+pad[3])
	return int64(n)*plane*int64(in.C) + (int64(in.C*k.kh*k.kw)+int64(c.Filters)+2)*plane
}
