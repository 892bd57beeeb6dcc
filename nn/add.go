package nn

import (
	"encoding/json"
	"errors"
)

// Add sums its inputs, two or more of one shape (or broadcast, see
// merge.go), element by element: a graph's node of several inputs
// (Node.Inputs), as Keras's Add layer, which joins a residual block's
// branch to its input. In a chain it has only one input, and is refused.
type Add struct{}

func (Add) kind() string { return "add" }

func init() {
	register("add", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(typeJSON) (LayerSpec, error) { return Add{}, nil })
	})
}

func (a Add) encode() (any, error) { return typeJSON{Type: a.kind()}, nil }

var errOneInput = errors.New("it takes two or more inputs: join them in a graph (NewGraph, Architecture.Inputs)")

func (Add) build(Shape) (layer, Shape, error) { return nil, Shape{}, errOneInput }

// bound: Add allocates nothing and keeps its input's shape.
func (Add) bound(in Shape) (Shape, int, bool, error) { return in, 0, true, nil }

// joinSpec is a spec of several inputs, which a Graph builds from all of
// their shapes.
type joinSpec interface {
	buildJoin(ins []Shape) (joiner, Shape, error)
}

// joiner is a layer of several inputs, without parameters: Forward and
// Backward take a buffer per input, in the node's order of inputs.
type joiner interface {
	OutSize() int
	// forwardJoin writes y (n×OutSize) from xs.
	forwardJoin(y []float32, xs [][]float32, n int)
	// backwardJoin overwrites each dxs[k] that is not nil with the
	// gradient with respect to input k; xs and y are the buffers of the
	// matching forwardJoin.
	backwardJoin(dxs [][]float32, dy []float32, xs [][]float32, y []float32, n int)
}

func (Add) buildJoin(ins []Shape) (joiner, Shape, error) { return elemJoin(opAdd, ins) }
