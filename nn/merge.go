package nn

import (
	"cmp"
	"encoding/json"
	"fmt"
)

// The merge layers besides Add, as Keras's keras.layers.merging: graph
// nodes of several inputs (Node.Inputs), without parameters. Subtract,
// Multiply, Average, Maximum and Minimum (and Add) work element by
// element on inputs of one shape, or broadcast as Keras's merges do:
// where the inputs' sizes differ, those of 1 are repeated (a 1×1×C
// channel gate Multiplied into an H×W×C map, as squeeze-and-excitation
// blocks do), and a vector of C stands for a 1×1×C image (Keras expands
// a lower-rank input after its batch axis). Concatenate joins its inputs
// along an axis. Inputs that agree in neither way are a *LayerError
// naming the node.
type (
	// Subtract is its first input minus its second: exactly two.
	Subtract struct{}
	// Multiply is the product of its inputs.
	Multiply struct{}
	// Average is the mean of its inputs.
	Average struct{}
	// Maximum is the largest of its inputs, element by element. Where
	// several inputs tie, the output's gradient goes to the first of
	// them in the node's order, and the others' is zero, as TensorFlow's
	// (tf.maximum sends it to x where x ≥ y, and Keras folds the inputs
	// from the first).
	Maximum struct{}
	// Minimum is the smallest of its inputs; ties as Maximum's.
	Minimum struct{}
	// Concatenate joins its inputs along Axis, numbered as Keras numbers
	// a channels-last batch: for H×W×C images −1 or 3 the channels, 1 or
	// −3 the rows, 2 or −2 the columns; for vectors −1 or 1. Axis 0 (the
	// zero value; Keras's batch axis, which cannot be joined) stands for
	// −1, Keras's default. The inputs must agree in every other size.
	// In nn's planar layout (C×H×W per example) a join of channels puts
	// each example's inputs one after the other, of rows each channel's
	// rows, and of columns each row's columns.
	Concatenate struct{ Axis int }
)

// elemOp is an element-wise merge.
type elemOp int

const (
	opSubtract elemOp = iota
	opMultiply
	opAverage
	opMaximum
	opMinimum
	opAdd
)

var elemKinds = [...]string{"subtract", "multiply", "average", "maximum", "minimum"}

func (Subtract) kind() string    { return elemKinds[opSubtract] }
func (Multiply) kind() string    { return elemKinds[opMultiply] }
func (Average) kind() string     { return elemKinds[opAverage] }
func (Maximum) kind() string     { return elemKinds[opMaximum] }
func (Minimum) kind() string     { return elemKinds[opMinimum] }
func (Concatenate) kind() string { return "concatenate" }

func init() {
	for op, spec := range []LayerSpec{Subtract{}, Multiply{}, Average{}, Maximum{}, Minimum{}} {
		register(elemKinds[op], func(raw json.RawMessage) (LayerSpec, error) {
			return decodeAs(raw, func(typeJSON) (LayerSpec, error) { return spec, nil })
		})
	}
	register("concatenate", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j concatJSON) (LayerSpec, error) {
			if j.Axis == nil {
				return nil, fmt.Errorf(`concatenate: no "axis"`)
			}
			c := Concatenate{Axis: *j.Axis}
			if err := c.check(); err != nil {
				return nil, fmt.Errorf("concatenate: %w", err)
			}
			return c, nil
		})
	})
}

func (s Subtract) encode() (any, error) { return typeJSON{Type: s.kind()}, nil }
func (s Multiply) encode() (any, error) { return typeJSON{Type: s.kind()}, nil }
func (s Average) encode() (any, error)  { return typeJSON{Type: s.kind()}, nil }
func (s Maximum) encode() (any, error)  { return typeJSON{Type: s.kind()}, nil }
func (s Minimum) encode() (any, error)  { return typeJSON{Type: s.kind()}, nil }

// concatJSON is Concatenate's JSON: its axis always written, −1 for 0.
type concatJSON struct {
	Type string `json:"type"`
	Axis *int   `json:"axis"`
}

func (c Concatenate) encode() (any, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	a := c.axis()
	return concatJSON{Type: c.kind(), Axis: &a}, nil
}

// axis is Axis, 0 standing for Keras's default, −1.
func (c Concatenate) axis() int { return cmp.Or(c.Axis, -1) }

func (c Concatenate) check() error {
	if a := c.axis(); a < -3 || a > 3 {
		return fmt.Errorf("axis %d: want -1 or 3 (channels), 1 or -3 (rows), 2 or -2 (columns), or -1 for a vector", a)
	}
	return nil
}

func (Subtract) build(Shape) (layer, Shape, error)    { return nil, Shape{}, errOneInput }
func (Multiply) build(Shape) (layer, Shape, error)    { return nil, Shape{}, errOneInput }
func (Average) build(Shape) (layer, Shape, error)     { return nil, Shape{}, errOneInput }
func (Maximum) build(Shape) (layer, Shape, error)     { return nil, Shape{}, errOneInput }
func (Minimum) build(Shape) (layer, Shape, error)     { return nil, Shape{}, errOneInput }
func (Concatenate) build(Shape) (layer, Shape, error) { return nil, Shape{}, errOneInput }

func (Subtract) buildJoin(ins []Shape) (joiner, Shape, error) {
	if len(ins) != 2 {
		return nil, Shape{}, fmt.Errorf("%d inputs: Subtract takes exactly two (the first minus the second)", len(ins))
	}
	return elemJoin(opSubtract, ins)
}
func (Multiply) buildJoin(ins []Shape) (joiner, Shape, error) { return elemJoin(opMultiply, ins) }
func (Average) buildJoin(ins []Shape) (joiner, Shape, error)  { return elemJoin(opAverage, ins) }
func (Maximum) buildJoin(ins []Shape) (joiner, Shape, error)  { return elemJoin(opMaximum, ins) }
func (Minimum) buildJoin(ins []Shape) (joiner, Shape, error)  { return elemJoin(opMinimum, ins) }

// elemJoin checks an element-wise merge's inputs, two or more, and
// plans their broadcast (see the merges' doc).
func elemJoin(op elemOp, ins []Shape) (joiner, Shape, error) {
	if len(ins) < 2 {
		return nil, Shape{}, errOneInput
	}
	out, ok := ins[0], true
	for _, s := range ins[1:] {
		if s != ins[0] {
			out, ok = broadcastShape(ins)
			break
		}
	}
	if !ok {
		return nil, Shape{}, fmt.Errorf("inputs of shapes %v: want one shape, or sizes of 1 where they differ (broadcast as Keras does)", ins)
	}
	l := &elementwise{op: op, Size: out.Size(), sizes: make([]int, len(ins)), ins: ins, out: out}
	for k, s := range ins {
		l.sizes[k] = s.Size()
		l.wide = l.wide || s != out
	}
	return l, out, nil
}

// plan makes the broadcast inputs' index maps, once, on the first
// forward pass: a model that is only checked never allocates them, and
// inputs of one shape share one.
func (l *elementwise) plan() {
	if !l.wide || l.index != nil {
		return
	}
	l.index = make([][]int32, len(l.ins))
	byShape := map[Shape][]int32{}
	for k, s := range l.ins {
		if s == l.out {
			continue
		}
		if byShape[s] == nil {
			byShape[s] = broadcastIndex(s, l.out)
		}
		l.index[k] = byShape[s]
	}
}

// dims is s as channels, rows and columns, a vector being 1×1×C.
func dims(s Shape) [3]int {
	if s.vector() {
		return [3]int{s.C, 1, 1}
	}
	return [3]int{s.C, s.H, s.W}
}

// broadcastShape is the shape the inputs broadcast to: in each of
// channels, rows and columns the largest size, which every input has or
// has 1 of; a vector when all are vectors.
func broadcastShape(ins []Shape) (Shape, bool) {
	var most [3]int
	vector := true
	for _, s := range ins {
		d := dims(s)
		for i := range most {
			most[i] = max(most[i], d[i])
		}
		vector = vector && s.vector()
	}
	for _, s := range ins {
		for i, n := range dims(s) {
			if n != 1 && n != most[i] {
				return Shape{}, false
			}
		}
	}
	if vector {
		return Shape{C: most[0]}, true
	}
	return Shape{H: most[1], W: most[2], C: most[0]}, true
}

// broadcastIndex is, for each of out's floats in the planar layout, the
// float of an example of shape s that it takes.
func broadcastIndex(s, out Shape) []int32 {
	d, o := dims(s), dims(out)
	idx := make([]int32, 0, out.Size())
	for c := 0; c < o[0]; c++ {
		for h := 0; h < o[1]; h++ {
			for w := 0; w < o[2]; w++ {
				cc, hh, ww := min(c, d[0]-1), min(h, d[1]-1), min(w, d[2]-1)
				idx = append(idx, int32((cc*d[1]+hh)*d[2]+ww))
			}
		}
	}
	return idx
}

// elementwise computes an element-wise merge of Size floats an example,
// of shape out, from inputs of shapes ins (sizes[k] floats an example).
// When wide (some input is broadcast), index[k], if not nil, maps each
// output float to the one of input k it takes (see plan).
type elementwise struct {
	op    elemOp
	Size  int
	sizes []int
	ins   []Shape
	out   Shape
	wide  bool
	index [][]int32
}

func (l *elementwise) OutSize() int { return l.Size }

// combine folds v into the running value a.
func (op elemOp) combine(a, v float32) float32 {
	switch op {
	case opSubtract:
		return a - v
	case opMultiply:
		return a * v
	case opMaximum:
		if v > a {
			return v
		}
		return a
	case opMinimum:
		if v < a {
			return v
		}
		return a
	}
	return a + v // opAdd, opAverage
}

func (l *elementwise) forwardJoin(y []float32, xs [][]float32, n int) {
	m := n * l.Size
	y = y[:m]
	if l.wide {
		l.plan()
		for e := 0; e < n; e++ {
			row := y[e*l.Size : (e+1)*l.Size]
			for i := range row {
				v := l.at(xs, 0, e, i)
				for k := 1; k < len(xs); k++ {
					v = l.op.combine(v, l.at(xs, k, e, i))
				}
				row[i] = v
			}
		}
	} else {
		copy(y, xs[0][:m])
		for _, x := range xs[1:] {
			x = x[:m]
			switch l.op {
			case opSubtract:
				for i, v := range x {
					y[i] -= v
				}
			case opMultiply:
				for i, v := range x {
					y[i] *= v
				}
			case opAdd, opAverage:
				for i, v := range x {
					y[i] += v
				}
			case opMaximum:
				for i, v := range x {
					if v > y[i] {
						y[i] = v
					}
				}
			case opMinimum:
				for i, v := range x {
					if v < y[i] {
						y[i] = v
					}
				}
			}
		}
	}
	if l.op == opAverage {
		k := 1 / float32(len(xs))
		for i := range y {
			y[i] *= k
		}
	}
}

// at is input k's float for output float i of example e.
func (l *elementwise) at(xs [][]float32, k, e, i int) float32 {
	if !l.wide {
		return xs[k][e*l.Size+i]
	}
	if ix := l.index[k]; ix != nil {
		return xs[k][e*l.sizes[k]+int(ix[i])]
	}
	return xs[k][e*l.Size+i]
}

// grad is the gradient of output float i of example e, whose gradient
// is g, with respect to input k's float there.
func (l *elementwise) grad(xs [][]float32, k, e, i int, g float32) float32 {
	switch l.op {
	case opSubtract:
		if k == 1 {
			return -g
		}
	case opAverage:
		return g / float32(len(xs))
	case opMultiply:
		// The product of the other inputs, not y/x_k, which a zero
		// would spoil.
		for j := range xs {
			if j != k {
				g *= l.at(xs, j, e, i)
			}
		}
	case opMaximum, opMinimum:
		// The first input holding the extreme takes the gradient.
		first := 0
		for j := 1; j < len(xs); j++ {
			if v, b := l.at(xs, j, e, i), l.at(xs, first, e, i); (l.op == opMaximum && v > b) || (l.op == opMinimum && v < b) {
				first = j
			}
		}
		if first != k {
			return 0
		}
	}
	return g
}

func (l *elementwise) backwardJoin(dxs [][]float32, dy []float32, xs [][]float32, _ []float32, n int) {
	m := n * l.Size
	dy = dy[:m]
	if l.wide {
		// A broadcast input's gradient sums its output floats'.
		for k, dx := range dxs {
			if dx == nil {
				continue
			}
			if l.index[k] != nil {
				clear(dx[:n*l.sizes[k]])
			}
			for e := 0; e < n; e++ {
				for i, g := range dy[e*l.Size : (e+1)*l.Size] {
					d := l.grad(xs, k, e, i, g)
					if ix := l.index[k]; ix != nil {
						dx[e*l.sizes[k]+int(ix[i])] += d
					} else {
						dx[e*l.Size+i] = d
					}
				}
			}
		}
		return
	}
	for k, dx := range dxs {
		if dx == nil {
			continue
		}
		dx = dx[:m]
		switch l.op {
		case opAdd:
			copy(dx, dy)
		case opSubtract:
			copy(dx, dy)
			if k == 1 {
				for i := range dx {
					dx[i] = -dx[i]
				}
			}
		default:
			for e := 0; e < n; e++ {
				for i, g := range dy[e*l.Size : (e+1)*l.Size] {
					dx[e*l.Size+i] = l.grad(xs, k, e, i, g)
				}
			}
		}
	}
}

// buildJoin resolves the axis on the inputs' rank and checks that they
// agree in every other size.
func (c Concatenate) buildJoin(ins []Shape) (joiner, Shape, error) {
	if err := c.check(); err != nil {
		return nil, Shape{}, err
	}
	if len(ins) < 2 {
		return nil, Shape{}, errOneInput
	}
	a := c.axis()
	vector := ins[0].vector()
	for _, s := range ins[1:] {
		if s.vector() != vector {
			return nil, Shape{}, fmt.Errorf("inputs of shapes %v: want all images or all vectors (Flatten or Reshape the others)", ins)
		}
	}
	out := ins[0]
	var what string
	j := &concat{inner: make([]int, len(ins))}
	switch {
	case vector && a != -1 && a != 1:
		return nil, Shape{}, fmt.Errorf("axis %d on vectors of sizes %v: a vector has one axis, -1 (or 1)", a, ins)
	case vector:
		out.C, what, j.outer = 0, "", 1
		for k, s := range ins {
			out.C += s.C
			j.inner[k] = s.C
		}
	case a == -1 || a == 3:
		out.C, what, j.outer = 0, "rows and columns", 1
		for k, s := range ins {
			out.C += s.C
			j.inner[k] = s.Size()
		}
	case a == 1 || a == -3:
		out.H, what, j.outer = 0, "columns and channels", ins[0].C
		for k, s := range ins {
			out.H += s.H
			j.inner[k] = s.H * s.W
		}
	default: // 2 or −2
		out.W, what, j.outer = 0, "rows and channels", ins[0].C*ins[0].H
		for k, s := range ins {
			out.W += s.W
			j.inner[k] = s.W
		}
	}
	for _, s := range ins[1:] {
		off := s
		switch {
		case vector:
			continue
		case a == -1 || a == 3:
			off.C = ins[0].C
		case a == 1 || a == -3:
			off.H = ins[0].H
		default:
			off.W = ins[0].W
		}
		if off != ins[0] {
			return nil, Shape{}, fmt.Errorf("inputs of shapes %v joined on axis %d: want the same %s", ins, a, what)
		}
	}
	j.size = out.Size()
	return j, out, nil
}

// concat joins its inputs example by example: each example's output is
// outer rounds of, input after input, inner[k] floats of input k.
type concat struct {
	outer, size int
	inner       []int
}

func (l *concat) OutSize() int { return l.size }

func (l *concat) forwardJoin(y []float32, xs [][]float32, n int) {
	off := 0
	for e := 0; e < n; e++ {
		for o := 0; o < l.outer; o++ {
			for k, x := range xs {
				w := l.inner[k]
				src := (e*l.outer + o) * w
				off += copy(y[off:off+w], x[src:src+w])
			}
		}
	}
}

func (l *concat) backwardJoin(dxs [][]float32, dy []float32, _ [][]float32, _ []float32, n int) {
	off := 0
	for e := 0; e < n; e++ {
		for o := 0; o < l.outer; o++ {
			for k, dx := range dxs {
				w := l.inner[k]
				if dx != nil {
					dst := (e*l.outer + o) * w
					copy(dx[dst:dst+w], dy[off:off+w])
				}
				off += w
			}
		}
	}
}
