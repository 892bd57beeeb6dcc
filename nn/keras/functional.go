package keras

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ref is a tensor a Functional model's config names: the output
// tensor-th of the node-th call of a layer.
type ref struct {
	layer        string
	node, tensor int
}

func (r ref) String() string { return r.layer }

// oneGraph is the end of the errors about a graph meshtrain cannot read.
const oneGraph = "meshtrain reads a Functional model whose layers each run once, from one input to one output"

// functional reads a Functional model: its layers in the file's order
// (Keras writes them inputs first), each taking the outputs of earlier
// ones. A chain (each layer taking the one before it) becomes a chain
// Architecture, as a Sequential's; any other graph (a residual Add, a
// layer whose output two others take) an Architecture with Inputs.
func (m *Model) functional(model map[string]any) error {
	cfg, ok := model["config"].(map[string]any)
	if !ok {
		return fmt.Errorf(`the Functional model's "config" is a %s, not an object`, kindOf(model["config"]))
	}
	list, ok := cfg["layers"].([]any)
	if !ok {
		return errors.New(`the Functional model's config has no "layers" list`)
	}
	name, _ := cfg["name"].(string)
	if name == "" {
		name = "model"
	}
	es, err := entries(list)
	if err != nil {
		return err
	}
	byName := map[string]int{}
	for i, e := range es {
		if e.name == "" {
			return &LayerError{Index: e.index, Class: e.class, Err: errors.New("no name: a Functional model's layers are linked by name")}
		}
		if j, dup := byName[e.name]; dup {
			return &LayerError{Index: e.index, Class: e.class, Name: e.name, Err: fmt.Errorf("the name of layer %d too", es[j].index)}
		}
		byName[e.name] = i
	}
	ins, err := tensorRefs(cfg["input_layers"])
	if err != nil {
		return fmt.Errorf("input_layers: %w", err)
	}
	outs, err := tensorRefs(cfg["output_layers"])
	if err != nil {
		return fmt.Errorf("output_layers: %w", err)
	}
	if len(ins) != 1 || len(outs) != 1 {
		return fmt.Errorf("%s and %s: %s; give the model one Input and one output",
			countRefs(len(ins), "input", ins), countRefs(len(outs), "output", outs), oneGraph)
	}
	// Each layer's inputs, by index in es.
	from := make([][]int, len(es))
	for i, e := range es {
		fail := func(err error) error { return &LayerError{Index: e.index, Class: e.class, Name: e.name, Err: err} }
		if nestedModel(e.class) {
			return fail(fmt.Errorf("a %s model nested in this one is not supported: meshtrain reads one level of layers, each with its own weights "+
				"(call the inner model's layers on the outer model's tensors instead of the model, or train it on its own)", e.class))
		}
		nodes, err := inboundNodes(e.obj["inbound_nodes"])
		if err != nil {
			return fail(fmt.Errorf("inbound_nodes: %w", err))
		}
		if e.class == "InputLayer" {
			if len(nodes) > 0 && len(nodes[0]) > 0 {
				return fail(errors.New("an InputLayer called on a tensor"))
			}
			if e.name != ins[0].layer {
				return fail(fmt.Errorf("a second input: %s", oneGraph))
			}
			continue
		}
		switch {
		case len(nodes) == 0:
			return fail(fmt.Errorf("not called on any tensor: %s", oneGraph))
		case len(nodes) > 1:
			return fail(fmt.Errorf("called %d times (a shared layer: one set of weights used at %d places) is not supported: %s; give each call a layer of its own",
				len(nodes), len(nodes), oneGraph))
		case len(nodes[0]) == 0:
			return fail(fmt.Errorf("called on no tensor: %s", oneGraph))
		}
		for _, r := range nodes[0] {
			j, ok := byName[r.layer]
			if !ok {
				return fail(fmt.Errorf("takes the output of %q, which is not one of the model's layers", r.layer))
			}
			if r.node != 0 || r.tensor != 0 {
				return fail(fmt.Errorf("takes output %d of call %d of %q: %s", r.tensor, r.node, r.layer, oneGraph))
			}
			if j == i {
				return fail(errors.New("takes its own output, through a cycle"))
			}
			if j > i {
				return fail(fmt.Errorf("takes the output of %q, listed after it: a cycle, or layers out of Keras's order", r.layer))
			}
			from[i] = append(from[i], j)
		}
	}
	for _, r := range append(slices.Clone(ins), outs...) {
		if _, ok := byName[r.layer]; !ok || r.node != 0 || r.tensor != 0 {
			return fmt.Errorf("the model's input or output %s is not the output of one of its layers", show([]any{r.layer, r.node, r.tensor}))
		}
	}
	// Every layer must lead to the output, and the output back to the input.
	on := make([]bool, len(es))
	out := byName[outs[0].layer]
	on[out] = true
	for i := out; i >= 0; i-- {
		if on[i] {
			for _, j := range from[i] {
				on[j] = true
			}
		}
	}
	if !on[byName[ins[0].layer]] {
		return fmt.Errorf("the output %q does not lead back to the input %q: %s", outs[0].layer, ins[0].layer, oneGraph)
	}
	for i, e := range es {
		if !on[i] {
			return &LayerError{Index: e.index, Class: e.class, Name: e.name, Err: fmt.Errorf("not on the path from the input to the output: the graph branches off and never rejoins; %s", oneGraph)}
		}
	}
	es, from = es[:out+1], from[:out+1]
	if err := rowsAxes(es, from); err != nil {
		return err
	}
	if chain(from) {
		return m.build(name, es, nil, nil)
	}
	return m.build(name, es, nil, from)
}

// chain reports whether each layer after the first takes the one before
// it, and only it.
func chain(from [][]int) bool {
	for i, f := range from[1:] {
		if len(f) != 1 || f[0] != i {
			return false
		}
	}
	return len(from) > 0 && len(from[0]) == 0
}

// joinRefs names the layers of refs.
func joinRefs(refs []ref) string {
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.layer
	}
	return strings.Join(names, ", ")
}

// countRefs is "1 input (x)" or "2 outputs (a, b)".
func countRefs(n int, what string, refs []ref) string {
	if n != 1 {
		what += "s"
	}
	if n == 0 {
		return "no " + what
	}
	return fmt.Sprintf("%d %s (%s)", n, what, joinRefs(refs))
}

// sortedKeys are m's keys in order, so that a dict's tensors are read
// (and named in errors) in one order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// nestedModel says a layer's class is a model's.
func nestedModel(class string) bool {
	return class == "Sequential" || class == "Functional" || class == "Model"
}

// tensorRefs reads input_layers or output_layers: a list of [layer,
// node, tensor] (Keras 2), or one such triple or a dict of them (Keras
// 3).
func tensorRefs(v any) ([]ref, error) {
	switch v := v.(type) {
	case []any:
		if len(v) > 0 {
			if _, ok := v[0].(string); ok {
				r, err := tensorRef(v)
				return []ref{r}, err
			}
		}
		var out []ref
		for _, x := range v {
			r, err := tensorRef(x)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	case map[string]any:
		var out []ref
		for _, k := range sortedKeys(v) {
			r, err := tensorRef(v[k])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a list of [layer, node, tensor]", show(v))
}

// tensorRef reads [layer, node, tensor] (with Keras 2's kwargs after).
func tensorRef(v any) (ref, error) {
	l, ok := v.([]any)
	if !ok || len(l) < 3 || len(l) > 4 {
		return ref{}, fmt.Errorf("%s: want [layer, node, tensor]", show(v))
	}
	name, ok := l[0].(string)
	node, err1 := intOf(l[1])
	tensor, err2 := intOf(l[2])
	if !ok || err1 != nil || err2 != nil {
		return ref{}, fmt.Errorf("%s: want [layer, node, tensor]", show(v))
	}
	if len(l) == 4 {
		if kw, ok := l[3].(map[string]any); l[3] != nil && (!ok || len(kw) > 0) {
			return ref{}, fmt.Errorf("%s: a call with arguments: %s", show(v), oneGraph)
		}
	}
	return ref{layer: name, node: node, tensor: tensor}, nil
}

// inboundNodes reads a layer's inbound_nodes: per call of the layer, the
// tensors it takes. Keras 2: [[[layer, node, tensor, kwargs], …], …];
// Keras 3: [{"args": […], "kwargs": {…}}, …], the tensors being
// {"class_name": "__keras_tensor__", "config": {"keras_history": [layer,
// node, tensor]}} anywhere in the arguments.
func inboundNodes(v any) ([][]ref, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list", show(v))
	}
	var out [][]ref
	for _, node := range list {
		switch node := node.(type) {
		case []any:
			var refs []ref
			for _, x := range node {
				r, err := tensorRef(x)
				if err != nil {
					return nil, err
				}
				refs = append(refs, r)
			}
			out = append(out, refs)
		case map[string]any:
			if kw, ok := node["kwargs"].(map[string]any); ok {
				for k, v := range kw {
					if v != nil {
						return nil, fmt.Errorf("a call with %s = %s: %s", k, show(v), oneGraph)
					}
				}
			}
			var refs []ref
			if err := kerasTensors(node["args"], &refs, 0); err != nil {
				return nil, err
			}
			out = append(out, refs)
		default:
			return nil, fmt.Errorf("%s: want a call's tensors", show(node))
		}
	}
	return out, nil
}

// kerasTensors adds the Keras 3 tensors in v to refs.
func kerasTensors(v any, refs *[]ref, depth int) error {
	if depth > 32 {
		return errors.New("arguments nested too deep")
	}
	switch v := v.(type) {
	case map[string]any:
		if v["class_name"] == "__keras_tensor__" {
			cfg, _ := v["config"].(map[string]any)
			r, err := tensorRef(cfg["keras_history"])
			if err != nil {
				return fmt.Errorf("keras_history: %w", err)
			}
			*refs = append(*refs, r)
			return nil
		}
		for _, k := range sortedKeys(v) {
			if err := kerasTensors(v[k], refs, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := kerasTensors(x, refs, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
