package kerasio

import (
	"fmt"
	"slices"

	"github.com/meshtrain/meshtrain/nn"
)

// binding is one Keras weight of a layer bound to nn's tensor: the
// values it takes (a view of the parameters or buffers), its Keras
// shape and layout (see rule.layout).
type binding struct {
	pair
	name   string // nn's tensor
	data   []float32
	kshape []int
	perm   []int
}

// bind binds each of a's layers' weights to m's tensors; every tensor
// of m must be bound once. m must be built from a.
func bind(a nn.Architecture, m nn.Model) (*plan, [][]binding, error) {
	p, err := newPlan(a)
	if err != nil {
		return nil, nil, err
	}
	type slot struct {
		t      nn.ParamTensor
		data   []float32
		bound  bool
		buffer bool
	}
	slots := map[string]*slot{}
	var names []string
	add := func(ts []nn.ParamTensor, data []float32, buffer bool) error {
		for _, t := range ts {
			if t.Offset+t.Size() > len(data) {
				return fmt.Errorf("tensor %s %v at %d: past the %d floats of the model", t.Name, t.Shape, t.Offset, len(data))
			}
			slots[t.Name] = &slot{t: t, data: data[t.Offset : t.Offset+t.Size()], buffer: buffer}
			names = append(names, t.Name)
		}
		return nil
	}
	if err := add(m.Tensors(), m.Params(), false); err != nil {
		return nil, nil, err
	}
	if st, ok := m.(nn.Stateful); ok {
		if err := add(st.BufferTensors(), st.Buffers(), true); err != nil {
			return nil, nil, err
		}
	}
	out := make([][]binding, len(a.Layers))
	for i := range a.Layers {
		for _, pr := range p.rules[i].weights {
			s, ok := slots[p.prefixes[i]+"."+pr.nn]
			if !ok {
				s, ok = slots[pr.nn] // a bare model's (softmax regression: weight, bias)
			}
			if !ok || s.bound || s.buffer != pr.buffer {
				continue // a weight the layer does not have (BatchNormalization without center …)
			}
			s.bound = true
			ks, perm := p.rules[i].layout(pr, s.t.Shape, layoutContext{spec: a.Layers[i], inShape: p.shapeOf(p.inputs(i)[0]), in: p.in[i], out: p.out[i]})
			out[i] = append(out[i], binding{pair: pr, name: s.t.Name, data: s.data, kshape: ks, perm: perm})
		}
	}
	for _, n := range names {
		if !slots[n].bound {
			return nil, nil, fmt.Errorf("tensor %s: no layer's Keras weights take it (a kind whose rule misses a weight)", n)
		}
	}
	return p, out, nil
}

// Export returns each of a's layers' weights as Keras holds them, in
// Keras's order (none for a layer without weights). m is the model
// built from a, with its parameters and buffers.
func Export(a nn.Architecture, m nn.Model) ([][]Weight, error) {
	_, bs, err := bind(a, m)
	if err != nil {
		return nil, err
	}
	out := make([][]Weight, len(bs))
	for i, layer := range bs {
		for _, b := range layer {
			w := Weight{Name: b.keras, Shape: slices.Clone(b.kshape), Data: make([]float32, len(b.data))}
			for k := range w.Data {
				w.Data[k] = b.data[at(b.perm, k)]
			}
			out[i] = append(out[i], w)
		}
	}
	return out, nil
}

// Expect returns the weights Import takes for a's layers: their names
// and Keras shapes, without data.
func Expect(a nn.Architecture, m nn.Model) ([][]Weight, error) {
	_, bs, err := bind(a, m)
	if err != nil {
		return nil, err
	}
	out := make([][]Weight, len(bs))
	for i, layer := range bs {
		for _, b := range layer {
			out[i] = append(out[i], Weight{Name: b.keras, Shape: slices.Clone(b.kshape)})
		}
	}
	return out, nil
}

// Import sets m's parameters and buffers from Keras's weights of each of
// a's layers (as Export returns them: every weight of the layer, by
// name, in any order). A weight missing, left over, or of another shape
// is an error naming the layer and the weight; m is changed only when
// all are right.
func Import(a nn.Architecture, m nn.Model, weights [][]Weight) error {
	_, bs, err := bind(a, m)
	if err != nil {
		return err
	}
	if len(weights) != len(bs) {
		return fmt.Errorf("weights for %d layers, the model has %d", len(weights), len(bs))
	}
	type job struct {
		b binding
		w Weight
	}
	var jobs []job
	for i, layer := range bs {
		used := make([]bool, len(weights[i]))
		for _, b := range layer {
			j := slices.IndexFunc(weights[i], func(w Weight) bool { return w.Name == b.keras })
			if j < 0 {
				return fmt.Errorf("layer %d (%s): no weight %s given (the model's %s, Keras shape %v)", i, nn.Kind(a.Layers[i]), b.keras, b.name, b.kshape)
			}
			w := weights[i][j]
			if !slices.Equal(w.Shape, b.kshape) || len(w.Data) != len(b.data) {
				return fmt.Errorf("layer %d (%s): weight %s has shape %v (%d values), the model's is %v", i, nn.Kind(a.Layers[i]), b.keras, w.Shape, len(w.Data), b.kshape)
			}
			used[j] = true
			jobs = append(jobs, job{b, w})
		}
		for j, u := range used {
			if !u {
				return fmt.Errorf("layer %d (%s): weight %s: the model's layer has no such weight", i, nn.Kind(a.Layers[i]), weights[i][j].Name)
			}
		}
	}
	for _, j := range jobs {
		for k, v := range j.w.Data {
			j.b.data[at(j.b.perm, k)] = v
		}
	}
	return nil
}

func at(perm []int, k int) int {
	if perm == nil {
		return k
	}
	return perm[k]
}
