package nn

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// mergeNodes is a graph on an image joining two convolutions'
// channels, then merging that with a third by op (of the given inputs
// besides those two), then joining rows and columns, then a classifier.
func mergeNodes(op LayerSpec, more int) []Node {
	ins := []int{2, 3}
	nodes := []Node{
		{Conv2D{Filters: 2, Kernel: 3, Padding: Same}, []int{-1}}, // 0
		{Conv2D{Filters: 3, Kernel: 3, Padding: Same}, []int{-1}}, // 1
		{Concatenate{}, []int{0, 1}},                              // 2: H×W×5
		{Conv2D{Filters: 5, Kernel: 1}, []int{-1}},                // 3: H×W×5
	}
	for k := 0; k < more; k++ {
		nodes = append(nodes, Node{Activation{"tanh"}, []int{3 + k}})
		ins = append(ins, len(nodes)-1)
	}
	m := len(nodes)
	return append(nodes,
		Node{op, ins},                                    // m
		Node{Concatenate{Axis: 1}, []int{m, 2}},          // 2H×W×5
		Node{Concatenate{Axis: -2}, []int{m + 1, m + 1}}, // 2H×2W×5
		Node{Flatten{}, []int{m + 2}},
		Node{Dense{Units: 4}, []int{m + 3}},
		Node{Activation{"softmax"}, []int{m + 4}},
	)
}

// TestMergeGradients checks graphs with each merge against finite
// differences of their loss: every element-wise merge of two and three
// inputs, a node taking one input twice, and Concatenate on channels,
// rows and columns of images and on vectors.
func TestMergeGradients(t *testing.T) {
	type tc struct {
		name  string
		input Shape
		nodes []Node
	}
	// Maximum and Minimum have a kink at every tie, which a finite
	// difference that crosses it misreads: they try a smaller step too
	// (gradCheckSteps), on a small image, so that few ties are within
	// reach of a weight's step.
	in := Shape{H: 2, W: 3, C: 3}
	cases := []tc{}
	for _, op := range []LayerSpec{Subtract{}, Multiply{}, Average{}, Maximum{}, Minimum{}} {
		cases = append(cases, tc{op.kind(), in, mergeNodes(op, 0)})
		if _, two := op.(Subtract); !two {
			cases = append(cases, tc{op.kind() + "_three", in, mergeNodes(op, 1)})
		}
	}
	cases = append(cases,
		tc{"multiply_square", Shape{C: 6}, []Node{
			{Dense{Units: 5}, []int{-1}},
			{Multiply{}, []int{0, 0}},
			{Dense{Units: 3}, []int{1}},
		}},
		// Squeeze-and-excitation's gate (a vector of channels, and the
		// same as a 1×1×C image), a per-example scalar, and rows.
		tc{"broadcast", Shape{H: 3, W: 4, C: 2}, []Node{
			{Conv2D{Filters: 4, Kernel: 3, Padding: Same}, []int{-1}}, // 0: 3×4×4
			{Flatten{}, []int{0}},                            // 1
			{Dense{Units: 4}, []int{1}},                      // 2
			{Activation{"sigmoid"}, []int{2}},                // 3
			{Multiply{}, []int{0, 3}},                        // 4: 3×4×4
			{Reshape{To: Shape{H: 1, W: 1, C: 4}}, []int{2}}, // 5
			{Add{}, []int{5, 4}},                             // 6
			{Dense{Units: 1}, []int{1}},                      // 7
			{Subtract{}, []int{6, 7}},                        // 8
			{Dense{Units: 12}, []int{1}},                     // 9
			{Reshape{To: Shape{H: 3, W: 1, C: 4}}, []int{9}}, // 10
			{Maximum{}, []int{8, 10}},                        // 11
			{Average{}, []int{11, 3, 7}},                     // 12
			{Flatten{}, []int{12}},                           // 13
			{Dense{Units: 3}, []int{13}},                     // 14
		}},
		tc{"concatenate_vectors", Shape{C: 6}, []Node{
			{Dense{Units: 5}, []int{-1}},            // 0
			{Activation{"tanh"}, []int{0}},          // 1
			{Concatenate{Axis: 1}, []int{1, -1, 0}}, // 2: 16
			{Dense{Units: 4}, []int{2}},             // 3
			{Maximum{}, []int{3, 3}},                // 4: a tie everywhere
			{Concatenate{Axis: -1}, []int{4, 2}},    // 5: 20
			{Dense{Units: 3}, []int{5}},             // 6
			{Activation{"softmax"}, []int{6}},       // 7
		}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewGraph(c.name, c.input, 3, 2, c.nodes...)
			if err != nil {
				t.Fatal(err)
			}
			const n = 5
			x, labels := testBatch(4, n, g.InputDim(), g.Classes())
			loss := func() float64 {
				l, err := g.ForwardBackward(x, labels, n)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			loss()
			steps := []float32{1e-3}
			if strings.HasPrefix(c.name, "maximum") || strings.HasPrefix(c.name, "minimum") || c.name == "broadcast" {
				steps = append(steps, 2.5e-4)
			}
			gradCheckSteps(t, g, slices.Clone(g.Grads()), loss, steps...)
			// The architecture reads back from its JSON, with its
			// merges, and builds the same model.
			b, err := json.Marshal(g.Architecture())
			if err != nil {
				t.Fatal(err)
			}
			a, err := ParseArchitecture(b)
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if b2, _ := json.Marshal(a); string(b2) != string(b) {
				t.Errorf("JSON\n%s\nread back as\n%s", b, b2)
			}
			m, err := a.Build(3, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.Params(), g.Params()) {
				t.Error("read back, other parameters")
			}
			if _, _, err := a.Check(); err != nil {
				t.Error(err)
			}
			if _, err := a.Buffers(8); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMergeValues runs each merge on two or three examples worked out by
// hand, forward and backward, with the planar layout's order for
// Concatenate and the first of tied inputs taking Maximum's and
// Minimum's gradient.
func TestMergeValues(t *testing.T) {
	img := func(h, w, c int) Shape { return Shape{H: h, W: w, C: c} }
	for _, tc := range []struct {
		name string
		spec joinSpec
		ins  []Shape
		xs   [][]float32 // one example each
		out  Shape
		y    []float32
		dy   []float32
		dxs  [][]float32
	}{
		{"subtract", Subtract{}, []Shape{{C: 3}, {C: 3}}, [][]float32{{1, 2, 3}, {4, 0, -1}}, Shape{C: 3},
			[]float32{-3, 2, 4}, []float32{1, 2, 3}, [][]float32{{1, 2, 3}, {-1, -2, -3}}},
		{"multiply", Multiply{}, []Shape{{C: 2}, {C: 2}, {C: 2}}, [][]float32{{1, 2}, {3, 0}, {5, 6}}, Shape{C: 2},
			[]float32{15, 0}, []float32{1, 2}, [][]float32{{15, 0}, {5, 24}, {3, 0}}},
		{"average", Average{}, []Shape{{C: 2}, {C: 2}}, [][]float32{{1, 2}, {3, 0}}, Shape{C: 2},
			[]float32{2, 1}, []float32{1, 4}, [][]float32{{0.5, 2}, {0.5, 2}}},
		{"maximum_ties", Maximum{}, []Shape{{C: 3}, {C: 3}, {C: 3}}, [][]float32{{1, 5, 2}, {3, 5, 2}, {3, 0, 7}}, Shape{C: 3},
			[]float32{3, 5, 7}, []float32{1, 2, 3}, [][]float32{{0, 2, 0}, {1, 0, 0}, {0, 0, 3}}},
		{"minimum_ties", Minimum{}, []Shape{{C: 3}, {C: 3}}, [][]float32{{1, 5, 2}, {1, 4, 3}}, Shape{C: 3},
			[]float32{1, 4, 2}, []float32{1, 2, 3}, [][]float32{{1, 0, 3}, {0, 2, 0}}},
		// Broadcasts: a vector of C is a 1×1×C gate; sizes of 1 repeat;
		// a broadcast input's gradient sums over its copies.
		{"multiply_channel_gate", Multiply{}, []Shape{img(1, 2, 2), {C: 2}}, [][]float32{{1, 2, 3, 4}, {10, 100}}, img(1, 2, 2),
			[]float32{10, 20, 300, 400}, []float32{1, 1, 1, 1}, [][]float32{{10, 10, 100, 100}, {3, 7}}},
		{"add_rows", Add{}, []Shape{img(2, 2, 1), img(2, 1, 1)}, [][]float32{{1, 2, 3, 4}, {10, 20}}, img(2, 2, 1),
			[]float32{11, 12, 23, 24}, []float32{1, 2, 3, 4}, [][]float32{{1, 2, 3, 4}, {3, 7}}},
		{"maximum_scalar_tie", Maximum{}, []Shape{{C: 3}, {C: 1}}, [][]float32{{1, 5, 2}, {2}}, Shape{C: 3},
			[]float32{2, 5, 2}, []float32{1, 2, 3}, [][]float32{{0, 2, 3}, {1}}},
		{"subtract_scalar", Subtract{}, []Shape{{C: 1}, img(1, 1, 2)}, [][]float32{{5}, {1, 2}}, img(1, 1, 2),
			[]float32{4, 3}, []float32{1, 2}, [][]float32{{3}, {-1, -2}}},
		// 2 rows × 1 column: channels c0 = [a0 a1], then the other input's.
		{"concatenate_channels", Concatenate{}, []Shape{img(2, 1, 1), img(2, 1, 2)},
			[][]float32{{1, 2}, {3, 4, 5, 6}}, img(2, 1, 3),
			[]float32{1, 2, 3, 4, 5, 6}, []float32{1, 2, 3, 4, 5, 6}, [][]float32{{1, 2}, {3, 4, 5, 6}}},
		// Rows: per channel, the first input's rows, then the second's.
		{"concatenate_rows", Concatenate{Axis: 1}, []Shape{img(1, 2, 2), img(2, 2, 2)},
			[][]float32{{1, 2, 3, 4}, {5, 6, 7, 8, 9, 10, 11, 12}}, img(3, 2, 2),
			[]float32{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}, []float32{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12},
			[][]float32{{1, 2, 3, 4}, {5, 6, 7, 8, 9, 10, 11, 12}}},
		// Columns: per channel and row, the first input's columns, then the second's.
		{"concatenate_columns", Concatenate{Axis: 2}, []Shape{img(2, 1, 1), img(2, 2, 1)},
			[][]float32{{1, 2}, {3, 4, 5, 6}}, img(2, 3, 1),
			[]float32{1, 3, 4, 2, 5, 6}, []float32{1, 3, 4, 2, 5, 6}, [][]float32{{1, 2}, {3, 4, 5, 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, out, err := tc.spec.buildJoin(tc.ins)
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.out || j.OutSize() != tc.out.Size() {
				t.Fatalf("output %v (%d floats), want %v", out, j.OutSize(), tc.out)
			}
			// Two examples: the second the first's values plus 100.
			two := func(v []float32) []float32 {
				r := slices.Clone(v)
				for _, x := range v {
					r = append(r, x+100)
				}
				return r
			}
			var xs [][]float32
			for _, x := range tc.xs {
				xs = append(xs, two(x))
			}
			y := make([]float32, 2*out.Size())
			j.forwardJoin(y, xs, 2)
			if !slices.Equal(y[:out.Size()], tc.y) {
				t.Errorf("y %v, want %v", y[:out.Size()], tc.y)
			}
			dy := slices.Concat(tc.dy, tc.dy)
			dxs := make([][]float32, len(xs))
			for k := range dxs {
				dxs[k] = make([]float32, len(xs[k]))
			}
			j.backwardJoin(dxs, dy, xs, y, 2)
			for k := range dxs {
				if got := dxs[k][:len(tc.xs[k])]; !slices.Equal(got, tc.dxs[k]) {
					t.Errorf("dx%d %v, want %v", k, got, tc.dxs[k])
				}
			}
			if _, isConcat := tc.spec.(Concatenate); isConcat {
				if want := two(tc.y); !slices.Equal(y, want) {
					t.Errorf("two examples: y %v, want %v", y, want)
				}
			}
		})
	}
}

// TestMergeErrors: inputs a merge cannot take are LayerErrors naming
// the node, from NewGraph and Check alike; a Concatenate's JSON is read
// strictly.
func TestMergeErrors(t *testing.T) {
	dense := func(u int) Node { return Node{Dense{Units: u}, []int{-1}} }
	img := Shape{H: 4, W: 4, C: 2}
	conv := func(f, k int) Node { return Node{Conv2D{Filters: f, Kernel: k}, []int{-1}} }
	for _, tc := range []struct {
		name  string
		input Shape
		nodes []Node
		want  string
	}{
		{"subtract_three", Shape{C: 5}, []Node{dense(3), dense(3), dense(3), {Subtract{}, []int{0, 1, 2}}, {Dense{Units: 2}, []int{3}}},
			"layer 3 (subtract): 3 inputs: Subtract takes exactly two"},
		{"multiply_one", Shape{C: 5}, []Node{dense(3), {Multiply{}, []int{0}}, {Dense{Units: 2}, []int{1}}},
			"layer 1 (multiply): it takes two or more inputs"},
		{"maximum_shapes", Shape{C: 5}, []Node{dense(3), dense(4), {Maximum{}, []int{0, 1}}, {Dense{Units: 2}, []int{2}}},
			"layer 2 (maximum): inputs of shapes [3 4]: want one shape, or sizes of 1 where they differ"},
		{"add_image_shapes", img, []Node{conv(3, 1), conv(3, 3), {Add{}, []int{0, 1}}, {Flatten{}, []int{2}}, {Dense{Units: 2}, []int{3}}},
			"layer 2 (add): inputs of shapes [4×4×3 2×2×3]: want one shape, or sizes of 1 where they differ"},
		{"multiply_vector_channels", img, []Node{conv(3, 1), {Flatten{}, []int{0}}, {Dense{Units: 2}, []int{1}}, {Multiply{}, []int{0, 2}}, {Flatten{}, []int{3}}, {Dense{Units: 2}, []int{4}}},
			"layer 3 (multiply): inputs of shapes [4×4×3 2]: want one shape, or sizes of 1 where they differ"},
		{"concatenate_rows_off", img, []Node{conv(3, 1), conv(3, 3), {Concatenate{Axis: 1}, []int{0, 1}}, {Flatten{}, []int{2}}, {Dense{Units: 2}, []int{3}}},
			"layer 2 (concatenate): inputs of shapes [4×4×3 2×2×3] joined on axis 1: want the same columns and channels"},
		{"concatenate_channels_off", img, []Node{conv(3, 1), conv(3, 3), {Concatenate{}, []int{0, 1}}, {Flatten{}, []int{2}}, {Dense{Units: 2}, []int{3}}},
			"layer 2 (concatenate): inputs of shapes [4×4×3 2×2×3] joined on axis -1: want the same rows and columns"},
		{"concatenate_mixed", img, []Node{conv(3, 1), {Flatten{}, []int{0}}, {Concatenate{}, []int{0, 1}}, {Flatten{}, []int{2}}, {Dense{Units: 2}, []int{3}}},
			"want all images or all vectors"},
		{"concatenate_vector_axis", Shape{C: 5}, []Node{dense(3), dense(3), {Concatenate{Axis: 2}, []int{0, 1}}, {Dense{Units: 2}, []int{2}}},
			"axis 2 on vectors of sizes [3 3]: a vector has one axis"},
		{"concatenate_axis", Shape{C: 5}, []Node{dense(3), dense(3), {Concatenate{Axis: 4}, []int{0, 1}}, {Dense{Units: 2}, []int{2}}},
			"layer 2 (concatenate): axis 4: want -1 or 3"},
		{"concatenate_in_a_chain", Shape{C: 5}, []Node{dense(3), {Concatenate{}, []int{0}}, {Dense{Units: 2}, []int{1}}},
			"layer 1 (concatenate): it takes two or more inputs"},
	} {
		_, err := NewGraph(tc.name, tc.input, 1, 1, tc.nodes...)
		var le *LayerError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a LayerError with %q", tc.name, err, tc.want)
		}
		arch := Architecture{Name: tc.name, Input: tc.input}
		for _, n := range tc.nodes {
			arch.Layers, arch.Inputs = append(arch.Layers, n.Layer), append(arch.Inputs, n.Inputs)
		}
		if _, _, err := arch.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check says %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ json, want string }{
		{`{"type":"concatenate"}`, `no "axis"`},
		{`{"type":"concatenate","axis":7}`, "axis 7"},
		{`{"type":"concatenate","axis":-1,"extra":1}`, "unknown field"},
		{`{"type":"maximum","axis":1}`, "unknown field"},
	} {
		if _, err := parseLayer(json.RawMessage(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
	// The default axis is written out as the value it stands for.
	if b, err := layerJSON(Concatenate{}); err != nil || string(b) != `{"type":"concatenate","axis":-1}` {
		t.Errorf("Concatenate{}: %s, %v", b, err)
	}
}

// TestConcatenateBounds: a Concatenate's output, the sum of its inputs,
// counts in the limits and the memory estimate.
func TestConcatenateBounds(t *testing.T) {
	a := Architecture{Name: "wide", Input: Shape{C: 4},
		Layers: []LayerSpec{Dense{Units: 3}, Dense{Units: 5}, Concatenate{}, Dense{Units: 2}},
		Inputs: [][]int{{-1}, {-1}, {0, 1}, {2}}}
	if _, params, err := a.Check(); err != nil || params != 15+25+18 {
		t.Fatalf("Check: %d parameters, %v", params, err)
	}
	b, err := a.Buffers(10)
	if err != nil {
		t.Fatal(err)
	}
	// Outputs 3 + 5 + 8 + 2 floats an example, and two of the largest (8).
	if b.Activations != 10*(3+5+8+2+2*8) {
		t.Errorf("activations %d", b.Activations)
	}
}
