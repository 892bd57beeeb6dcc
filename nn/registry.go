package nn

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A LayerSpec describes one layer of a model: Conv2D, DepthwiseConv2D,
// MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D,
// GlobalMaxPooling2D, ZeroPadding2D, Cropping2D, UpSampling2D, Flatten,
// Reshape, Dense, Dropout, Activation, BatchNormalization, Rescaling,
// Normalization, or a merge of several inputs in a graph (Add, Subtract,
// Multiply, Average, Maximum, Minimum, Concatenate). It names no input
// size: a model infers each layer's input shape from the layers it takes.
//
// Each kind lives in one file (conv.go, pool.go, dense.go …): its spec,
// its kernels, its JSON and its bounds, registered by name in layerKinds,
// so a new kind is one file and one register call; nothing else in nn
// switches on the kinds.
type LayerSpec interface {
	// kind is the layer's name in errors and summaries, Keras's in snake
	// case ("conv2d", "max_pooling2d" …).
	kind() string
	// build returns the layer computing the spec on inputs of shape in,
	// and its output shape, or an error saying why it cannot.
	build(in Shape) (layer, Shape, error)
	// encode returns the spec's canonical JSON value: an object whose
	// "type" is the name the kind is registered under, every option
	// written out (a default as the value it stands for).
	encode() (any, error)
}

// bounder is a spec whose build allocates in proportion to its options
// (weights, scratch): bound returns its output shape and parameter count
// for input in without allocating, ok false when the shapes do not
// compose (build then says why), and an error when the layer would pass
// the limits (see MaxParams). Specs that are not bounders build cheaply.
type bounder interface {
	bound(in Shape) (out Shape, params int, ok bool, err error)
}

// layerKinds maps each kind's JSON "type" to its decoder, which reads
// the kind's JSON object strictly. Each kind's file registers itself.
var layerKinds = map[string]func(raw json.RawMessage) (LayerSpec, error){}

// register adds a kind to layerKinds; a name registered twice is a
// programming error.
func register(typ string, decode func(raw json.RawMessage) (LayerSpec, error)) {
	if _, dup := layerKinds[typ]; dup {
		panic("nn: layer kind " + typ + " registered twice")
	}
	layerKinds[typ] = decode
}

// decodeAs reads raw strictly into a J and makes the spec from it: the
// body of most kinds' decoders.
func decodeAs[J any](raw json.RawMessage, spec func(J) (LayerSpec, error)) (LayerSpec, error) {
	var j J
	if err := strict(raw, &j); err != nil {
		return nil, err
	}
	return spec(j)
}

// Kind is s's kind as errors and summaries name it ("conv2d",
// "activation relu" …), for readers of other formats (nn/keras) that
// list what they built.
func Kind(s LayerSpec) string { return s.kind() }

// layerJSON is one layer spec's canonical JSON.
func layerJSON(s LayerSpec) (json.RawMessage, error) {
	if s == nil {
		return nil, fmt.Errorf("a nil layer spec")
	}
	v, err := s.encode()
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// typeJSON is the field every layer's JSON starts with, and the whole
// JSON of a kind without options.
type typeJSON struct {
	Type string `json:"type"`
}

// parseLayer reads one layer's JSON through the registry.
func parseLayer(raw json.RawMessage) (LayerSpec, error) {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	decode, ok := layerKinds[t.Type]
	if !ok {
		names := make([]string, 0, len(layerKinds))
		for n := range layerKinds {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("type %q: want one of %s", t.Type, strings.Join(names, ", "))
	}
	return decode(raw)
}

// boundOf is s's bound (see bounder), or for a spec that builds cheaply
// its build's output shape.
func boundOf(s LayerSpec, in Shape) (out Shape, params int, ok bool, err error) {
	if b, is := s.(bounder); is {
		return b.bound(in)
	}
	l, o, err := s.build(in)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	return o, l.NumParams(), true, nil
}
