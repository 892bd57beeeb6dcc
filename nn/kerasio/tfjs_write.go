package kerasio

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/nn"
)

// TF.js's names for what WriteTFJS writes.
const (
	ModelJSON   = "model.json"
	weightsFile = "group1-shard1of1.bin"
	tfjsVersion = "tfjs-layers 4.22.0" // the keras_version tfjs-layers writes, which its loader reads
)

// tfjsModel is a TF.js layers model's model.json.
type tfjsModel struct {
	Format          string          `json:"format"`
	GeneratedBy     string          `json:"generatedBy"`
	ConvertedBy     any             `json:"convertedBy"`
	ModelTopology   map[string]any  `json:"modelTopology"`
	WeightsManifest []manifestGroup `json:"weightsManifest"`
}

// WriteTFJS writes m, built from a with its parameters and buffers, as a
// TensorFlow.js layers model in dir (made if missing): model.json, whose
// modelTopology is a Sequential (a chain) or a Model (a graph) of
// Keras's layers, and its weights in one file beside it, float32
// little-endian, as tf.loadLayersModel reads them. nn's activations are
// Activation layers of their own; the layers are named as Keras names
// them (conv2d, conv2d_1 …).
func WriteTFJS(dir string, a nn.Architecture, m nn.Model) error {
	p, err := newPlan(a)
	if err != nil {
		return err
	}
	weights, err := Export(a, m)
	if err != nil {
		return err
	}
	names := layerNames(a)
	var layers []map[string]any
	var entries []manifestEntry
	var data []byte
	input := "input_1"
	for i, s := range a.Layers {
		ins := p.inputs(i)
		class, cfg, err := p.rules[i].keras(s, layerContext{in: p.shapeOf(ins[0]), out: p.shapes[i], inOrder: p.in[i]})
		if err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, nn.Kind(s), err)
		}
		cfg["name"], cfg["trainable"], cfg["dtype"] = names[i], true, "float32"
		layer := map[string]any{"class_name": class, "config": cfg}
		if a.Inputs != nil {
			var inbound []any
			for _, j := range ins {
				from := input
				if j >= 0 {
					from = names[j]
				}
				inbound = append(inbound, []any{from, 0, 0, map[string]any{}})
			}
			layer["name"], layer["inbound_nodes"] = names[i], []any{inbound}
		} else if i == 0 {
			cfg["batch_input_shape"] = append([]any{nil}, toAny(inputDims(a))...)
		}
		layers = append(layers, layer)
		for _, w := range weights[i] {
			entries = append(entries, manifestEntry{Name: names[i] + "/" + w.Name, Shape: w.Shape, Dtype: "float32"})
			for _, v := range w.Data {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			}
		}
	}
	topo := map[string]any{"keras_version": tfjsVersion, "backend": "tensor_flow.js"}
	if a.Inputs == nil {
		topo["class_name"], topo["config"] = "Sequential", map[string]any{"name": a.Name, "layers": layers}
	} else {
		in := map[string]any{"class_name": "InputLayer", "name": input, "inbound_nodes": []any{}, "config": map[string]any{
			"batch_input_shape": append([]any{nil}, toAny(inputDims(a))...), "dtype": "float32", "sparse": false, "name": input}}
		last := names[len(names)-1]
		topo["class_name"], topo["config"] = "Model", map[string]any{"name": a.Name, "layers": append([]map[string]any{in}, layers...),
			"input_layers": []any{[]any{input, 0, 0}}, "output_layers": []any{[]any{last, 0, 0}}}
	}
	model := tfjsModel{Format: "layers-model", GeneratedBy: "meshtrain", ModelTopology: topo,
		WeightsManifest: []manifestGroup{{Paths: []string{weightsFile}, Weights: entries}}}
	js, err := json.MarshalIndent(model, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, weightsFile), data, 0o644); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ModelJSON), append(js, '\n'), 0o644)
}

// layerNames names a's layers as Keras does: by kind, the second of a
// kind _1, and so on (conv2d, conv2d_1 …); an input layer is input_1.
func layerNames(a nn.Architecture) []string {
	seen := map[string]int{}
	out := make([]string, len(a.Layers))
	for i, s := range a.Layers {
		k := kindOf(s)
		if n := seen[k]; n > 0 {
			out[i] = fmt.Sprintf("%s_%d", k, n)
		} else {
			out[i] = k
		}
		seen[k]++
	}
	return out
}

func toAny(d []int) []any {
	out := make([]any, len(d))
	for i, v := range d {
		out[i] = v
	}
	return out
}

// inputDims is a's input as Keras's shape without the batch: a
// sequence's L×C, else dims.
func inputDims(a nn.Architecture) []int {
	if SequenceInput(a) {
		return []int{a.Input.W, a.Input.C}
	}
	return dims(a.Input)
}

// SequenceInput reports whether a's input, 1×L×C, is a sequence a 1-D
// layer takes (Keras's L×C), rather than an image of one row.
func SequenceInput(a nn.Architecture) bool {
	if a.Input.H != 1 {
		return false
	}
	for i, s := range a.Layers {
		from := []int{i - 1}
		if a.Inputs != nil {
			from = a.Inputs[i]
		}
		for _, j := range from {
			if j == -1 {
				switch kindOf(s) {
				case "conv1d", "max_pooling1d", "average_pooling1d", "global_max_pooling1d", "global_average_pooling1d":
					return true
				}
			}
		}
	}
	return false
}
