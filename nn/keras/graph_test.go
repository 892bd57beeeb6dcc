package keras

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// TestGraphFiles: Functional models with Add and BatchNormalization read
// as nn graphs (a chain as a chain), their layers and inputs as the file
// links them, and build into models that train and keep buffers.
func TestGraphFiles(t *testing.T) {
	bn := func(m float64) nn.LayerSpec { return nn.BatchNormalization{Momentum: m, Epsilon: 0.001} }
	for _, tc := range []struct {
		file    string
		layers  []string // nn.Kind of each nn layer
		inputs  [][]int  // nil for a chain
		bnAt    int      // the first nn layer that is a BatchNormalization
		bn      nn.LayerSpec
		buffers []string
	}{
		{"residual_keras3.json",
			[]string{"conv2d", "batch_normalization", "activation relu", "conv2d", "batch_normalization", "add", "activation relu", "flatten", "dense", "activation softmax"},
			[][]int{{-1}, {0}, {1}, {2}, {3}, {4, -1}, {5}, {6}, {7}, {8}},
			1, bn(0.9), []string{"1.running_mean", "1.running_var", "4.running_mean", "4.running_var"}},
		{"add_branches_tfkeras2.json",
			[]string{"conv2d", "activation relu", "conv2d", "activation relu", "add", "flatten", "dense", "activation softmax"},
			[][]int{{-1}, {0}, {-1}, {2}, {1, 3}, {4}, {5}, {6}},
			-1, nil, nil},
		{"batchnorm_tfkeras2.json",
			[]string{"conv2d", "batch_normalization", "activation relu", "flatten", "dense", "activation softmax"},
			nil, 1, bn(0.99), []string{"1.running_mean", "1.running_var"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, s := range m.Arch.Layers {
				kinds = append(kinds, nn.Kind(s))
			}
			if !slices.Equal(kinds, tc.layers) {
				t.Errorf("layers %v, want %v", kinds, tc.layers)
			}
			if !slices.EqualFunc(m.Arch.Inputs, tc.inputs, slices.Equal) || (m.Arch.Inputs == nil) != (tc.inputs == nil) {
				t.Errorf("inputs %v, want %v", m.Arch.Inputs, tc.inputs)
			}
			if tc.bnAt >= 0 && m.Arch.Layers[tc.bnAt] != tc.bn {
				t.Errorf("layer %d %+v, want %+v", tc.bnAt, m.Arch.Layers[tc.bnAt], tc.bn)
			}
			b, err := json.Marshal(m.Arch)
			if err != nil {
				t.Fatal(err)
			}
			if graph := strings.Contains(string(b), nn.GraphFormat); graph != (tc.inputs != nil) {
				t.Errorf("JSON %s: a graph's format %v, want %v", b, graph, tc.inputs != nil)
			}
			model, err := m.Arch.Build(1, 2)
			if err != nil {
				t.Fatal(err)
			}
			st := model.(nn.Stateful)
			var names []string
			for _, bt := range st.BufferTensors() {
				names = append(names, bt.Name)
			}
			if !slices.Equal(names, tc.buffers) {
				t.Errorf("buffers %v, want %v", names, tc.buffers)
			}
			n := 4
			x := make([]float32, n*model.InputDim())
			for i := range x {
				x[i] = float32(i%7) / 7
			}
			labels := []int32{0, 1, 2, 3}
			before := slices.Clone(st.Buffers())
			if _, err := model.ForwardBackward(x, labels, n); err != nil {
				t.Fatal(err)
			}
			if len(before) > 0 && slices.Equal(before, st.Buffers()) {
				t.Error("a training step left the moving statistics alone")
			}
		})
	}
}

// TestBatchNormOptions: Keras's BatchNormalization options that nn does
// not have are refused by name.
func TestBatchNormOptions(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`"axis": 1`, "axis 1 is not supported: meshtrain normalises an image's channels"},
		{`"momentum": 0`, "momentum 0 is not supported"},
		{`"gamma_initializer": {"class_name": "Zeros", "config": {}}`, `gamma_initializer {"class_name":"Zeros","config":{}} is not supported`},
		{`"renorm": true`, "renorm = true (batch renormalisation) is not supported"},
		{`"gamma_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}`, "gamma_regularizer L2"},
		{`"center": false, "scale": false`, `"type":"batch_normalization","momentum":0.99,"epsilon":0.001,"center":false,"scale":false`},
		{`"axis": [3], "renorm": false, "renorm_momentum": 0.99, "fused": true`, `"type":"batch_normalization"`},
	} {
		m, err := Parse([]byte(seq("4, 4, 2", layer("BatchNormalization", tc.config), `{"class_name": "Flatten", "config": {"name": "f"}}`, softmax10)))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			b, _ := json.Marshal(m.Arch)
			got = string(b)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %s, want %s", tc.config, got, tc.want)
		}
	}
}
