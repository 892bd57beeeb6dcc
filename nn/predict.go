package nn

import (
	"fmt"
	"math"
	"slices"
)

// Predictor is a Model that hands out its outputs, as Keras's
// model.predict does: class probabilities after a final softmax (or, one
// per example, a final sigmoid's), and the class scores themselves when
// the model ends without one. Writers of other formats (ONNX, TF.js)
// check their models against it, and eval --predictions writes it.
type Predictor interface {
	// Outputs is the floats per example Predict writes.
	Outputs() int
	// Predict writes n examples' outputs, n×Outputs() floats, into out:
	// an inference pass, as Evaluate's.
	Predict(x []float32, n int, out []float32) error
}

var (
	_ Predictor = (*Sequential)(nil)
	_ Predictor = (*Graph)(nil)
)

// Outputs is 1 for a binary model (one score and a sigmoid), else Classes.
func (m *Sequential) Outputs() int { return outputs(m.loss, m.classes) }

// Outputs is as Sequential's.
func (g *Graph) Outputs() int { return outputs(g.loss, g.classes) }

func outputs(loss lossKind, classes int) int {
	if loss == sigmoidBCE {
		return 1
	}
	return classes
}

func (m *Sequential) Predict(x []float32, n int, out []float32) error {
	return predict(m.name, m.InputDim(), m.Outputs(), finalOf(m.specs), x, n, out, len(m.shards),
		func(i int, keep []float32) { m.shards[i].keep = keep }, m.dispatch)
}

func (g *Graph) Predict(x []float32, n int, out []float32) error {
	return predict(g.name, g.InputDim(), g.Outputs(), finalOf(g.specs), x, n, out, len(g.shards),
		func(i int, keep []float32) { g.shards[i].keep = keep }, g.dispatch)
}

// finalOf is the model's final softmax or sigmoid, "" if it ends in scores.
func finalOf(specs []LayerSpec) string {
	if a, ok := specs[len(specs)-1].(Activation); ok && (a.Fn == "softmax" || a.Fn == "sigmoid") {
		return a.Fn
	}
	return ""
}

// predict runs n examples through dispatch evalChunk per shard at a time,
// each shard keeping its examples' scores in out (setKeep), then applies
// the final activation.
func predict(name string, dim, k int, final string, x []float32, n int, out []float32, shards int,
	setKeep func(i int, keep []float32), dispatch func(x []float32, labels []int32, n int, train bool, scale float32)) error {
	if n < 0 || len(x) < n*dim || len(out) < n*k {
		return fmt.Errorf("nn: %s: predicting %d examples needs %d inputs and room for %d outputs, got %d and %d", name, n, n*dim, n*k, len(x), len(out))
	}
	step := evalChunk * shards
	labels := make([]int32, min(n, step)) // class 0: any label is valid, and unused
	for off := 0; off < n; off += step {
		c := min(step, n-off)
		first := off
		for i := range shards { // dispatch's split
			part := c / shards
			if i < c%shards {
				part++
			}
			setKeep(i, out[first*k:(first+part)*k])
			first += part
		}
		dispatch(x[off*dim:], labels, c, false, 0)
	}
	for i := range shards {
		setKeep(i, nil)
	}
	for e := range n {
		z := out[e*k : (e+1)*k]
		switch final {
		case "sigmoid":
			z[0] = float32(1 / (1 + math.Exp(-float64(z[0]))))
		case "softmax":
			top := float64(slices.Max(z))
			var sum float64
			for j, v := range z {
				p := math.Exp(float64(v) - top)
				z[j], sum = float32(p), sum+p
			}
			for j := range z {
				z[j] = float32(float64(z[j]) / sum)
			}
		}
	}
	return nil
}

// Shapes returns the output shape of each of a's layers (after a check,
// see Check): what readers and writers of other formats need to lay a
// layer's weights out as those formats do (nn/kerasio).
func (a Architecture) Shapes() ([]Shape, error) {
	if _, _, err := a.Check(); err != nil {
		return nil, err
	}
	if a.Inputs != nil {
		nodes, err := a.nodes()
		if err != nil {
			return nil, err
		}
		g := newGraph(a.Name, a.Input, nodes)
		if _, err := g.compile(); err != nil {
			return nil, err
		}
		return slices.Clone(g.outs), nil
	}
	m := &Sequential{name: a.Name, input: a.Input, specs: a.Layers}
	if _, err := m.compile(false); err != nil {
		return nil, err
	}
	return m.outs, nil
}
