package nn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// GraphFormat is the "format" of a graph's Architecture JSON (Inputs
// set): ArchitectureFormat's, each layer's object with its "inputs"
// last:
//
//	{"format": "meshtrain-graph/1", "name": "res", "input": [8, 8, 4], "layers": [
//	  {"type": "conv2d", …, "inputs": [-1]},
//	  {"type": "batch_normalization", …, "inputs": [0]},
//	  {"type": "add", "inputs": [1, -1]}, …]}
const GraphFormat = "meshtrain-graph/1"

// nodes are a graph's layers with their inputs.
func (a Architecture) nodes() ([]Node, error) {
	if len(a.Inputs) != len(a.Layers) {
		return nil, fmt.Errorf("nn: %s: %d layers and %d lists of inputs: want one list a layer", a.Name, len(a.Layers), len(a.Inputs))
	}
	nodes := make([]Node, len(a.Layers))
	for i, s := range a.Layers {
		nodes[i] = Node{Layer: s, Inputs: a.Inputs[i]}
	}
	return nodes, nil
}

// toJSON is a's JSON value: a chain's as ArchitectureFormat has always
// written it, a graph's with each layer's inputs.
func (a Architecture) toJSON() (archJSON, error) {
	raws, err := layersJSON(a.Layers)
	if err != nil {
		return archJSON{}, fmt.Errorf("nn: architecture %s: %w", a.Name, err)
	}
	j := archJSON{Format: ArchitectureFormat, Name: a.Name, Input: a.Input, Layers: raws}
	if a.Inputs == nil {
		return j, nil
	}
	if _, err := a.nodes(); err != nil {
		return archJSON{}, err
	}
	j.Format = GraphFormat
	for i, raw := range raws {
		ins, err := json.Marshal(a.Inputs[i])
		if err != nil {
			return archJSON{}, err
		}
		if a.Inputs[i] == nil {
			ins = []byte("[]")
		}
		// raw is an object: the inputs go last, before its brace.
		raws[i] = append(append(append(bytes.Clone(raw[:len(raw)-1]), `,"inputs":`...), ins...), '}')
	}
	return j, nil
}

// splitInputs returns a graph layer's "inputs" and its JSON without them.
func splitInputs(raw json.RawMessage) ([]int, json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, nil, err
	}
	v, ok := fields["inputs"]
	if !ok {
		return nil, nil, errors.New(`no "inputs": a graph's layer lists the layers it takes`)
	}
	var ins []int
	if err := json.Unmarshal(v, &ins); err != nil {
		return nil, nil, fmt.Errorf("inputs %s: want a list of layer indices (-1 the model's input)", v)
	}
	if ins == nil {
		ins = []int{}
	}
	delete(fields, "inputs")
	rest, err := json.Marshal(fields)
	return ins, rest, err
}

// nodeBound is boundOf for a graph's node i, whose inputs' shapes are
// outs (the earlier nodes') or a.Input: a merge's output depends on all
// of them (a Concatenate's is their sum). ok is false when the inputs
// are not earlier nodes or do not compose; compile says why.
func (a Architecture) nodeBound(i int, outs []Shape) (out Shape, params int, ok bool, err error) {
	if i >= len(a.Inputs) || len(a.Inputs[i]) == 0 {
		return Shape{}, 0, false, nil
	}
	ins := make([]Shape, len(a.Inputs[i]))
	for k, j := range a.Inputs[i] {
		if j < -1 || j >= i {
			return Shape{}, 0, false, nil
		}
		if ins[k] = a.Input; j >= 0 {
			ins[k] = outs[j]
		}
	}
	if js, is := a.Layers[i].(joinSpec); is {
		_, out, err := js.buildJoin(ins)
		return out, 0, err == nil, nil
	}
	return boundOf(a.Layers[i], ins[0])
}
