package onnx

import (
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// The rows of the merge layers besides Add. Keras broadcasts a vector of
// C against an H×W×C image as a 1×1×C one (as nn does); ONNX aligns
// trailing dimensions, so such a vector, N×C, is made N×C×1×1 first.
func init() {
	for kind, op := range map[string]string{"subtract": "Sub", "multiply": "Mul", "average": "Mean", "maximum": "Max", "minimum": "Min"} {
		ops[kind] = func(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
			ins = b.broadcastable(i, ins)
			if op == "Sub" || op == "Mul" { // binary in ONNX: folded from the first, as Keras folds them
				out := ins[0]
				for k, x := range ins[1:] {
					out = b.addNamed(i, fmt.Sprintf("%s%d", op, k), op, []string{out, x})
				}
				return out, nil
			}
			return b.add(i, op, ins), nil
		}
	}
	ops["concatenate"] = concatOp
}

// broadcastable returns layer i's inputs with each vector made N×C×1×1
// when the layer's output is an image.
func (b *builder) broadcastable(i int, ins []string) []string {
	if !image(b.shapes[i]) {
		return ins
	}
	from := b.a.Inputs[i]
	out := make([]string, len(ins))
	for k, x := range ins {
		out[k] = x
		s := b.a.Input
		if from[k] >= 0 {
			s = b.shapes[from[k]]
		}
		if !image(s) {
			axes := b.int64s(b.name(i, fmt.Sprintf("axes%d", k)), 2, 3)
			out[k] = b.addNamed(i, fmt.Sprintf("unsqueezed%d", k), "Unsqueeze", []string{x, axes})
		}
	}
	return out
}

// concatOp: Keras's channels-last axis as ONNX's of N×C×H×W (or N×C).
func concatOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	c := s.(nn.Concatenate)
	axis := 1 // channels, or a vector's values
	if image(b.shapes[i]) {
		switch c.Axis {
		case 1, -3:
			axis = 2
		case 2, -2:
			axis = 3
		}
	}
	return b.add(i, "Concat", ins, intAttr("axis", axis)), nil
}
