package keras

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// concatAxes are the axes of the Concatenate layers of a, in order.
func concatAxes(a nn.Architecture) []int {
	var axes []int
	for _, s := range a.Layers {
		if c, ok := s.(nn.Concatenate); ok {
			axes = append(axes, c.Axis)
		}
	}
	return axes
}

// countKinds counts a's nn layers by kind.
func countKinds(a nn.Architecture) map[string]int {
	n := map[string]int{}
	for _, s := range a.Layers {
		n[nn.Kind(s)]++
	}
	return n
}

// TestFunctionalMergeFiles: Functional graphs with every merge class,
// written by TensorFlow.js itself (gen_tfjs.js: model.save's model.json
// and model.toJSON) and in tf.keras 2's and Keras 3's forms
// (gen_keras.py), read as nn graphs whose merges take the tensors the
// file names, in its order, and whose models train a step.
func TestFunctionalMergeFiles(t *testing.T) {
	for _, tc := range []struct {
		file    string
		form    string
		params  int
		kinds   map[string]int
		axes    []int
		inputs  [][]int // nil: not checked
		outputs int     // floats out of the last Concatenate
	}{
		{"tfjs_resblock_model.json", FormTFJS, 224 + 16 + 584 + 16 + 32 + 5130,
			map[string]int{"conv2d": 3, "batch_normalization": 2, "add": 1, "activation relu": 2},
			nil, [][]int{{-1}, {0}, {1}, {2}, {3}, {-1}, {4, 5}, {6}, {7}, {8}, {9}}, 0},
		{"tfjs_branches.json", FormKeras2, 16 + 112 + 16 + 2*12304 + 330,
			map[string]int{"concatenate": 4, "average": 1, "maximum": 1, "minimum": 1, "multiply": 1},
			[]int{-1, 1, 2, -1}, nil, 32},
		{"branches_keras3.json", FormKeras3, 8 + 40 + 8 + 2*37648 + 490,
			map[string]int{"concatenate": 4, "subtract": 1, "average": 1, "maximum": 1, "minimum": 1, "multiply": 1},
			[]int{-1, 1, 2, -1}, nil, 48},
		{"branches_tfkeras2.json", FormKeras2, 8 + 40 + 8 + 2*37648 + 490,
			map[string]int{"concatenate": 4, "subtract": 1, "average": 1, "maximum": 1, "minimum": 1, "multiply": 1},
			[]int{-1, 1, 2, -1}, nil, 48},
		// A 28×28 input has no channel axis in Keras: its axis -1 is the
		// columns, nn's 2 on the 28×28×1 image.
		{"rows_input_keras3.json", FormKeras3, 28*56*10 + 10,
			map[string]int{"concatenate": 1, "activation relu": 1},
			[]int{2}, [][]int{{-1}, {-1, 0}, {1}, {2}, {3}}, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Form != tc.form || m.Class != "Functional" || m.Arch.Inputs == nil {
				t.Errorf("form %q, class %q, graph %v", m.Form, m.Class, m.Arch.Inputs != nil)
			}
			if m.Params != tc.params {
				t.Errorf("%d parameters, want %d", m.Params, tc.params)
			}
			got := countKinds(m.Arch)
			for k, n := range tc.kinds {
				if got[k] != n {
					t.Errorf("%d %s layers, want %d (%v)", got[k], k, n, got)
				}
			}
			if axes := concatAxes(m.Arch); !slices.Equal(axes, tc.axes) {
				t.Errorf("Concatenate axes %v, want %v", axes, tc.axes)
			}
			if tc.inputs != nil && !slices.EqualFunc(m.Arch.Inputs, tc.inputs, slices.Equal) {
				t.Errorf("inputs %v, want %v", m.Arch.Inputs, tc.inputs)
			}
			model, err := m.Arch.Build(1, 2)
			if err != nil {
				t.Fatal(err)
			}
			n := 4
			x := make([]float32, n*model.InputDim())
			for i := range x {
				x[i] = float32(i%11) / 11
			}
			labels := []int32{0, 1, 2, 3}
			loss, err := model.ForwardBackward(x, labels, n)
			if err != nil || !(loss > 0) {
				t.Fatalf("loss %v, %v", loss, err)
			}
			if _, right, err := model.Evaluate(x, labels, n); err != nil || right < 0 || right > n {
				t.Fatalf("evaluate: %d right, %v", right, err)
			}
		})
	}
	// The one model in both of Keras's forms is one architecture.
	a, err1 := ReadFile(filepath.Join("testdata", "branches_keras3.json"))
	b, err2 := ReadFile(filepath.Join("testdata", "branches_tfkeras2.json"))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	da, _ := a.Arch.Digest()
	db, _ := b.Arch.Digest()
	if da != db {
		t.Errorf("branches: digest %s in Keras 3's form, %s in tf.keras 2's", da, db)
	}
}

// TestResNet20Files: ResNet-20 as Keras users write it, in tf.keras 2's
// and Keras 3's forms and as TensorFlow.js writes it, reads as one
// architecture of 272,474 parameters (PyTorch's anchor without its 784
// convolution biases), with 21 batch normalisations, 9 residual Adds and
// 21 convolutions, that trains a step. (A file refused at a layer would
// set refused: the table keeps the form.)
func TestResNet20Files(t *testing.T) {
	var digests []string
	for _, tc := range []struct {
		file    string
		refused *LayerError
	}{
		{"resnet20_tfkeras2.json", nil},
		{"resnet20_keras3.json", nil},
		{"tfjs_resnet20.json", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ReadFile(filepath.Join("testdata", tc.file))
			if tc.refused != nil {
				var le *LayerError
				if !errors.As(err, &le) || le.Index != tc.refused.Index || le.Name != tc.refused.Name || le.Class != tc.refused.Class ||
					!strings.Contains(err.Error(), tc.refused.Err.Error()) {
					t.Fatalf("error %v, want %v", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			k := countKinds(m.Arch)
			if m.Params != 272474 || k["batch_normalization"] != 21 || k["add"] != 9 || k["conv2d"] != 21 || m.Classes != 10 {
				t.Errorf("%d parameters, %d classes, layers %v", m.Params, m.Classes, k)
			}
			d, _ := m.Arch.Digest()
			digests = append(digests, d)
			model, err := m.Arch.Build(1, 1)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, 2*model.InputDim())
			if _, err := model.ForwardBackward(x, []int32{3, 7}, 2); err != nil {
				t.Fatal(err)
			}
		})
	}
	if len(digests) != 3 || len(slices.Compact(slices.Clone(digests))) != 1 {
		t.Errorf("the three forms read as different architectures: digests %v", digests)
	}
}

// TestFunctionalRefusals: what meshtrain does not read is refused
// naming the layer (index, name, class) and why: a layer called twice
// (shared weights), a model nested in the model, a Concatenate of the
// batch axis; several inputs are named.
func TestFunctionalRefusals(t *testing.T) {
	for _, tc := range []struct {
		file  string
		layer *LayerError // nil: an error about the model
		want  string
	}{
		{"shared_layer_keras3.json", &LayerError{Index: 2, Name: "tied", Class: "Dense"},
			"called 2 times (a shared layer: one set of weights used at 2 places) is not supported"},
		{"nested_model_keras3.json", &LayerError{Index: 1, Name: "features", Class: "Sequential"},
			"a Sequential model nested in this one is not supported: meshtrain reads one level of layers"},
		{"two_inputs_tfkeras2.json", nil, "2 inputs (left, right) and 1 output (scores): meshtrain reads a Functional model"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := ReadFile(filepath.Join("testdata", tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			var le *LayerError
			if tc.layer != nil && (!errors.As(err, &le) || le.Index != tc.layer.Index || le.Name != tc.layer.Name || le.Class != tc.layer.Class) {
				t.Errorf("error %v, want one about layer %d %q (%s)", err, tc.layer.Index, tc.layer.Name, tc.layer.Class)
			}
		})
	}
}

// TestConcatenateOptions: Concatenate's axis as Keras writes it, and
// the shapes nn cannot join, refused naming the Keras layer.
func TestConcatenateOptions(t *testing.T) {
	graph := func(shape, axis string) string {
		return `{"class_name": "Functional", "config": {"name": "m", "layers": [` +
			`{"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, ` + shape + `], "name": "x"}, "inbound_nodes": []},` +
			`{"class_name": "Activation", "name": "a", "config": {"name": "a", "activation": "tanh"}, "inbound_nodes": [[["x", 0, 0, {}]]]},` +
			`{"class_name": "Concatenate", "name": "cat", "config": {"name": "cat", ` + axis + `}, "inbound_nodes": [[["x", 0, 0, {}], ["a", 0, 0, {}]]]},` +
			`{"class_name": "Flatten", "name": "f", "config": {"name": "f"}, "inbound_nodes": [[["cat", 0, 0, {}]]]},` +
			`{"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 3}, "inbound_nodes": [[["f", 0, 0, {}]]]}],` +
			`"input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}}`
	}
	for _, tc := range []struct {
		shape, axis string
		want        string // the canonical JSON's concatenate, or the error
	}{
		{"4, 4, 2", `"axis": -1`, `{"type":"concatenate","axis":-1,"inputs":[-1,0]}`},
		{"4, 4, 2", `"axis": 3`, `{"type":"concatenate","axis":3,"inputs":[-1,0]}`},
		{"4, 4, 2", `"axis": 1`, `{"type":"concatenate","axis":1,"inputs":[-1,0]}`},
		{"4, 4, 2", `"axis": -2`, `{"type":"concatenate","axis":-2,"inputs":[-1,0]}`},
		{"4, 4, 2", `"trainable": true`, `{"type":"concatenate","axis":-1,"inputs":[-1,0]}`},
		{"12", `"axis": 1`, `{"type":"concatenate","axis":1,"inputs":[-1,0]}`},
		// No channel axis: Keras's -1 and 2 are the columns, 1 and -2 the rows.
		{"4, 4", `"axis": -1`, `{"type":"concatenate","axis":2,"inputs":[-1,0]}`},
		{"4, 4", `"axis": -2`, `{"type":"concatenate","axis":1,"inputs":[-1,0]}`},
		{"4, 4", `"axis": 3`, `layer 2 "cat" (Concatenate): axis 3 of tensors of rows × columns (no channel axis)`},
		{"4, 4, 2", `"axis": 0`, `layer 2 "cat" (Concatenate): axis 0 is the batch's`},
		{"4, 4, 2", `"axis": 4`, `layer 2 "cat" (Concatenate): axis 4: meshtrain joins vectors`},
		{"4, 4, 2", `"axis": "x"`, `layer 2 "cat" (Concatenate): axis: "x": want an integer`},
		{"12", `"axis": 2`, `layer 2 "cat" (Concatenate): axis 2 on vectors of sizes [12 12]`},
	} {
		src := graph(tc.shape, tc.axis)
		m, err := Parse([]byte(src))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			b, _ := m.Arch.MarshalJSON()
			got = string(b)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("input %s, %s: got %s\nwant %s", tc.shape, tc.axis, got, tc.want)
		}
	}
	// Off the axis the shapes must agree: a valid convolution has fewer
	// rows and columns than its input.
	src := strings.Replace(graph("4, 4, 2", `"axis": -1`), `{"class_name": "Activation", "name": "a", "config": {"name": "a", "activation": "tanh"}`,
		`{"class_name": "Conv2D", "name": "a", "config": {"name": "a", "filters": 2, "kernel_size": 3}`, 1)
	_, err := Parse([]byte(src))
	var le *LayerError
	if !errors.As(err, &le) || le.Name != "cat" || !strings.Contains(err.Error(), "inputs of shapes [4×4×2 2×2×2] joined on axis -1: want the same rows and columns") {
		t.Errorf("shapes off the axis: %v", err)
	}
}

// TestDepthwiseBranchesFiles: a depthwise-separable branch beside a 1×1
// one, joined by Concatenate, in tf.keras 2's and Keras 3's forms and as
// TensorFlow.js writes it (tf.keras 2's DepthwiseConv2D carrying Conv2D's
// groups = 1), reads as one architecture of 8,162 parameters joining 16
// channels, that trains a step.
func TestDepthwiseBranchesFiles(t *testing.T) {
	var digests []string
	for _, tc := range []struct {
		file    string
		refused *LayerError
	}{
		{"depthwise_branches_tfkeras2.json", nil},
		{"depthwise_branches_keras3.json", nil},
		{"tfjs_depthwise_branches.json", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ReadFile(filepath.Join("testdata", tc.file))
			if tc.refused != nil {
				var le *LayerError
				if !errors.As(err, &le) || le.Index != tc.refused.Index || le.Name != tc.refused.Name || le.Class != tc.refused.Class ||
					!strings.Contains(err.Error(), tc.refused.Err.Error()) {
					t.Fatalf("error %v, want %v", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Params != 8162 || !slices.Equal(concatAxes(m.Arch), []int{-1}) || m.Classes != 10 {
				t.Errorf("%d parameters, %d classes, Concatenate axes %v", m.Params, m.Classes, concatAxes(m.Arch))
			}
			d, _ := m.Arch.Digest()
			digests = append(digests, d)
			model, err := m.NewModel(nn.MNISTSpec, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, 2*model.InputDim())
			if _, err := model.ForwardBackward(x, []int32{3, 7}, 2); err != nil {
				t.Fatal(err)
			}
		})
	}
	if len(digests) != 3 || len(slices.Compact(slices.Clone(digests))) != 1 {
		t.Errorf("the three forms read as different architectures: digests %v", digests)
	}
}

// TestMergeOfRowsAndOthers: Keras broadcasts a vector against a tensor
// of rows × columns by rank, (N, 4) against (N, 4, 4), which nn's
// channels-last shapes would not do alike: refused by name.
func TestMergeOfRowsAndOthers(t *testing.T) {
	const src = `{"class_name": "Functional", "config": {"name": "m", "layers": [` +
		`{"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 4, 4], "name": "x"}, "inbound_nodes": []},` +
		`{"class_name": "Flatten", "name": "f", "config": {"name": "f"}, "inbound_nodes": [[["x", 0, 0, {}]]]},` +
		`{"class_name": "Dense", "name": "gate", "config": {"name": "gate", "units": 4}, "inbound_nodes": [[["f", 0, 0, {}]]]},` +
		`{"class_name": "Multiply", "name": "mul", "config": {"name": "mul"}, "inbound_nodes": [[["x", 0, 0, {}], ["gate", 0, 0, {}]]]},` +
		`{"class_name": "Flatten", "name": "f2", "config": {"name": "f2"}, "inbound_nodes": [[["mul", 0, 0, {}]]]},` +
		`{"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 3}, "inbound_nodes": [[["f2", 0, 0, {}]]]}],` +
		`"input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}}`
	_, err := Parse([]byte(src))
	var le *LayerError
	if !errors.As(err, &le) || le.Index != 3 || le.Name != "mul" || !strings.Contains(err.Error(), "a merge of tensors of rows × columns without a channel axis and of others is not supported") {
		t.Errorf("error %v", err)
	}
	// With a channel axis the gate is Keras's (N, 4) against (N, 4, 4, 4):
	// one scale per channel, as nn broadcasts a vector.
	ok := strings.Replace(src, `[null, 4, 4]`, `[null, 4, 4, 4]`, 1)
	m, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if m.Params != 64*4+4+64*3+3 {
		t.Errorf("%d parameters", m.Params)
	}
}
