package kerasio

import (
	"fmt"
	"strings"

	"github.com/meshtrain/meshtrain/nn"
)

// Weight is one of a Keras layer's weights as Keras holds it: its name
// in the layer ("kernel", "moving_mean"), its shape and its values,
// row-major.
type Weight struct {
	Name  string
	Shape []int
	Data  []float32
}

// pair is one of a kind's weights: nn's tensor (the suffix of its name,
// "weight"), Keras's weight ("kernel"), and whether nn holds it among
// the buffers rather than the parameters.
type pair struct {
	nn, keras string
	buffer    bool
}

// flow is how a layer passes on the order of a vector (see order.go).
type flow int

const (
	keep    flow = iota // element-wise: the output is in its input's order
	fresh               // computes a new vector or image (Conv2D, Dense, pooling)
	flatten             // an image becomes a vector
	reshape             // either way (see plan.reshape)
	concat              // joins its inputs (Concatenate): vectors' orders one after the other
)

// rule is how one nn kind stands in Keras.
type rule struct {
	// weights are the kind's weights in Keras's order (those a layer
	// lacks, such as a BatchNormalization's beta without center, are
	// skipped).
	weights []pair
	flow    flow
	// layout gives a weight's Keras shape and where each of its Keras
	// values is in nn's tensor: nnData[perm[k]] is Keras's value k (nil
	// perm: the same order). nnShape is nn's tensor's shape.
	layout func(p pair, nnShape []int, c layoutContext) (kerasShape []int, perm []int)
	// keras is the Keras layer written for the spec: its class and
	// config (without name, which the writer gives), for a TF.js model.
	keras func(s nn.LayerSpec, c layerContext) (class string, cfg map[string]any, err error)
}

// layoutContext is what a layout knows of the layer besides a tensor's
// shape: its spec, its input's shape, and the orders of its input and
// output vectors.
type layoutContext struct {
	spec    nn.LayerSpec
	inShape nn.Shape
	in, out order
}

// rules is the one table: nn's kinds (nn.Kind's first word) and how
// each stands in Keras.
var rules = map[string]rule{
	"conv2d":              {weights: []pair{{"weight", "kernel", false}, {"bias", "bias", false}}, flow: fresh, layout: convLayout, keras: conv2DLayer},
	"dense":               {weights: []pair{{"weight", "kernel", false}, {"bias", "bias", false}}, flow: fresh, layout: denseLayout, keras: denseLayer},
	"batch_normalization": {weights: bnWeights, flow: keep, layout: channelLayout, keras: batchNormLayer},
	"max_pooling2d":       {flow: fresh, keras: poolLayer},
	"average_pooling2d":   {flow: fresh, keras: poolLayer},
	"flatten":             {flow: flatten, keras: flattenLayer},
	"reshape":             {flow: reshape, keras: reshapeLayer},
	"dropout":             {flow: keep, keras: dropoutLayer},
	"activation":          {flow: keep, keras: activationLayer},
	"add":                 {flow: keep, keras: addLayer},
}

var bnWeights = []pair{{"weight", "gamma", false}, {"bias", "beta", false}, {"running_mean", "moving_mean", true}, {"running_var", "moving_variance", true}}

// kindOf is s's kind as rules keys it: "activation relu" is activation.
func kindOf(s nn.LayerSpec) string {
	k, _, _ := strings.Cut(nn.Kind(s), " ")
	return k
}

// ruleOf is s's row, or an error naming the layer whose kind has none.
func ruleOf(i int, s nn.LayerSpec) (rule, error) {
	r, ok := rules[kindOf(s)]
	if !ok {
		return rule{}, fmt.Errorf("layer %d (%s): meshtrain has no Keras form of this kind's weights yet", i, nn.Kind(s))
	}
	return r, nil
}

// convLayout: nn's [out, in, kh, kw] is Keras's [kh, kw, in, out]; the
// bias is the same.
func convLayout(p pair, s []int, _ layoutContext) ([]int, []int) {
	if p.keras != "kernel" {
		return s, nil
	}
	return transpose(s, []int{2, 3, 1, 0})
}

// denseLayout: nn's [out, in] is Keras's [in, out], its rows in the
// input's order and its columns in the output's; the bias in the
// output's.
func denseLayout(p pair, s []int, c layoutContext) ([]int, []int) {
	in, out := c.in, c.out
	if p.keras != "kernel" {
		return s, out.perm(s[0])
	}
	o, n := s[0], s[1]
	perm := make([]int, o*n)
	for r := range o { // nn's row r: output r
		for c := range n { // nn's column c: input c
			perm[in.at(c)*o+out.at(r)] = r*n + c
		}
	}
	return []int{n, o}, perm
}

// channelLayout: one value per channel; of a vector, in its order.
func channelLayout(_ pair, s []int, c layoutContext) ([]int, []int) { return s, c.in.perm(s[0]) }

// transpose is the Keras shape of a tensor of nn's shape s whose axis d
// is nn's axis axes[d], and where each Keras value is in nn's tensor.
func transpose(s, axes []int) ([]int, []int) {
	ks := make([]int, len(s))
	for d, a := range axes {
		ks[d] = s[a]
	}
	stride := make([]int, len(s)) // nn's strides
	n := 1
	for d := len(s) - 1; d >= 0; d-- {
		stride[d], n = n, n*s[d]
	}
	perm := make([]int, n)
	idx := make([]int, len(s)) // Keras's index, row-major
	for k := range n {
		off := 0
		for d, a := range axes {
			off += idx[d] * stride[a]
		}
		perm[k] = off
		for d := len(ks) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < ks[d] {
				break
			}
			idx[d] = 0
		}
	}
	return ks, perm
}
