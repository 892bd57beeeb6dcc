package kerasio

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/meshtrain/meshtrain/nn"
)

// order is where a vector's values are in Keras's vector: nn's value i
// is Keras's value order[i]. nil is the same order. A vector flattened
// from an H×W×C image is in C×H×W order in nn and H×W×C in Keras.
type order []int

// at is where nn's value i is in Keras's vector.
func (o order) at(i int) int {
	if o == nil {
		return i
	}
	return o[i]
}

// perm is o as a layout's perm for a tensor of n values, one per value
// of the vector (perm[k] is the nn index of Keras's value k): nil for
// the same order.
func (o order) perm(n int) []int {
	if o == nil || len(o) != n {
		return nil
	}
	p := make([]int, n)
	for i, k := range o {
		p[k] = i
	}
	return p
}

func (o order) same(p order) bool {
	if o == nil || p == nil {
		return o.identity() && p.identity()
	}
	return slices.Equal(o, p)
}

func (o order) identity() bool {
	for i, k := range o {
		if i != k {
			return false
		}
	}
	return true
}

// flatOrder is the order of an image s flattened: nil for one channel,
// where C×H×W and H×W×C are the same.
func flatOrder(s nn.Shape) order {
	if s.C == 1 || s.H*s.W == 1 {
		return nil
	}
	o := make(order, s.Size())
	for c := range s.C {
		for p := range s.H * s.W {
			o[c*s.H*s.W+p] = p*s.C + c
		}
	}
	return o
}

func isImage(s nn.Shape) bool { return s.H != 0 || s.W != 0 }

// plan is an architecture's layers with what the conversion needs: each
// layer's rule, output shape, inputs, and the order of its first input
// and of its output; and each layer's tensor prefix.
type plan struct {
	arch     nn.Architecture
	rules    []rule
	shapes   []nn.Shape
	in, out  []order
	prefixes []string
}

// inputs is layer i's inputs (−1 the model's input).
func (p *plan) inputs(i int) []int {
	if p.arch.Inputs != nil {
		return p.arch.Inputs[i]
	}
	return []int{i - 1}
}

// shapeOf is the shape node j gives (−1 the input).
func (p *plan) shapeOf(j int) nn.Shape {
	if j < 0 {
		return p.arch.Input
	}
	return p.shapes[j]
}

func (p *plan) orderOf(j int) order {
	if j < 0 {
		return nil
	}
	return p.out[j]
}

// newPlan checks that every layer of a has a rule and that Keras's
// orders can be had by permuting weights, and works them out: a Dense
// whose output a Reshape makes an image of several channels takes that
// image's order (demand).
func newPlan(a nn.Architecture) (*plan, error) {
	shapes, err := a.Shapes()
	if err != nil {
		return nil, err
	}
	p := &plan{arch: a, shapes: shapes}
	for i, s := range a.Layers {
		r, err := ruleOf(i, s)
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, r)
	}
	if p.prefixes, err = TensorPrefixes(a); err != nil {
		return nil, err
	}
	demand := map[int]order{}
	for {
		d, want, err := p.orders(demand)
		if err != nil {
			return nil, err
		}
		if d < 0 {
			break
		}
		demand[d] = want
	}
	n := len(a.Layers) - 1
	if !p.out[n].identity() {
		return nil, fmt.Errorf("layer %d (%s): the model's outputs are a flattened image of several channels, which Keras orders otherwise: end with a Dense", n, nn.Kind(a.Layers[n]))
	}
	return p, nil
}

// orders works out every layer's input and output order given the Dense
// layers' demanded outputs. It returns a Dense to demand an order of and
// run again and the order it is to give, or −1 when done.
func (p *plan) orders(demand map[int]order) (int, order, error) {
	n := len(p.arch.Layers)
	p.in, p.out = make([]order, n), make([]order, n)
	for i, s := range p.arch.Layers {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("layer %d (%s): "+format, append([]any{i, nn.Kind(s)}, args...)...)
		}
		ins := p.inputs(i)
		in, inShape := p.orderOf(ins[0]), p.shapeOf(ins[0])
		out := p.shapes[i]
		if p.rules[i].flow == concat {
			p.in[i] = in
			if !isImage(out) {
				var orders []order
				var sizes []int
				for _, j := range ins {
					orders, sizes = append(orders, p.orderOf(j)), append(sizes, p.shapeOf(j).Size())
				}
				p.out[i] = concatOrder(orders, sizes)
			}
			continue
		}
		for _, j := range ins[1:] {
			if !p.orderOf(j).same(in) {
				return 0, nil, fail("its inputs are vectors in different orders (one flattened from an image, one not), which no weights can reconcile with Keras's")
			}
		}
		p.in[i] = in
		switch p.rules[i].flow {
		case keep:
			p.out[i] = in
		case fresh:
			p.out[i] = demand[i]
		case flatten:
			p.out[i] = in
			if isImage(inShape) {
				p.out[i] = flatOrder(inShape)
			}
		case reshape:
			switch {
			case !isImage(out) && isImage(inShape):
				p.out[i] = flatOrder(inShape)
			case !isImage(out):
				p.out[i] = in
			case !isImage(inShape):
				if want := flatOrder(out); !in.same(want) {
					if d := p.denseBefore(ins[0]); d >= 0 {
						if _, done := demand[d]; !done {
							return d, want, nil
						}
					}
					return 0, nil, fail("a vector made an image of %v: Keras lays it out channels last, meshtrain channel by channel, and no Dense before it (through element-wise layers) can have its outputs reordered", out)
				}
			case inShape != out && (inShape.C != 1 || out.C != 1):
				return 0, nil, fail("an image of %v reshaped to %v: Keras reorders it channels last, meshtrain keeps the planar order; they agree only for one channel", inShape, out)
			}
		}
	}
	return -1, nil, nil
}

// denseBefore is the Dense whose output reaches layer j's output through
// element-wise layers of one input, or −1.
func (p *plan) denseBefore(j int) int {
	for j >= 0 {
		if kindOf(p.arch.Layers[j]) == "dense" {
			return j
		}
		if p.rules[j].flow != keep || len(p.inputs(j)) != 1 {
			return -1
		}
		j = p.inputs(j)[0]
	}
	return -1
}

// TensorPrefixes are the layers' tensor prefixes ("3", or the spec's
// name: "conv1"), as nn names them (a Model's Tensors are
// "3.weight" …), read from the architecture's canonical JSON.
func TensorPrefixes(a nn.Architecture) ([]string, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	var j struct {
		Layers []struct {
			Name string `json:"name"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, err
	}
	out := make([]string, len(j.Layers))
	for i, l := range j.Layers {
		out[i] = l.Name
		if l.Name == "" {
			out[i] = fmt.Sprint(i)
		}
	}
	return out, nil
}
