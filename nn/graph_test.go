package nn

import (
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// residualNodes is a residual block (conv → BN → relu → conv → BN, added
// to the block's input, relu) on a C-channel input, then a classifier.
func residualNodes(c, classes int) []Node {
	return []Node{
		{Conv2D{Filters: c, Kernel: 3, Padding: Same}, []int{-1}},  // 0
		{BatchNormalization{Momentum: 0.9}, []int{0}},              // 1
		{Activation{"relu"}, []int{1}},                             // 2
		{Conv2D{Filters: c, Kernel: 3, Padding: Same}, []int{2}},   // 3
		{BatchNormalization{Momentum: 0.9, Name: "bn2"}, []int{3}}, // 4
		{Add{}, []int{4, -1}},                                      // 5
		{Activation{"relu"}, []int{5}},                             // 6
		{Flatten{}, []int{6}},                                      // 7
		{Dense{Units: classes}, []int{7}},                          // 8
		{Activation{"softmax"}, []int{8}},                          // 9
	}
}

// TestGraphGradients checks whole graphs' gradients against finite
// differences of their mean loss (training mode): the residual block,
// whose Add sends its gradient both down the branch and straight to the
// input; a node whose output two later nodes take (its gradient the sum
// of theirs), one added to itself, and dropout.
func TestGraphGradients(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input Shape
		nodes []Node
	}{
		{"residual_block", Shape{H: 5, W: 6, C: 3}, residualNodes(3, 4)},
		// 8 channels on an even image: both convolutions by Winograd.
		{"residual_block_winograd", Shape{H: 4, W: 6, C: 8}, residualNodes(8, 3)},
		{"shared_output", Shape{C: 7}, []Node{
			{Dense{Units: 6}, []int{-1}},      // 0
			{Activation{"tanh"}, []int{0}},    // 1
			{Dense{Units: 6}, []int{1}},       // 2
			{Dropout{Rate: 0.2}, []int{2}},    // 3
			{Add{}, []int{1, 3, 1}},           // 4: takes 1 twice
			{BatchNormalization{}, []int{4}},  // 5
			{Dense{Units: 3}, []int{5}},       // 6
			{Activation{"softmax"}, []int{6}}, // 7
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGraph(tc.name, tc.input, 5, 2, tc.nodes...)
			if err != nil {
				t.Fatal(err)
			}
			if wino, want := winoConvs(g), strings.HasSuffix(tc.name, "winograd"); (wino > 0) != want {
				t.Fatalf("%d convolutions by Winograd", wino)
			}
			const n = 6
			x, labels := testBatch(9, n, g.InputDim(), g.Classes())
			loss := func() float64 {
				g.SetStep(1, 2, 3)
				l, err := g.ForwardBackward(x, labels, n)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			loss()
			gradCheck(t, g, slices.Clone(g.Grads()), loss)
		})
	}
}

// TestGraphChainMatchesSequential: a chain built as a Graph has the
// Sequential's parameters, bit for bit, and its loss and gradient to
// rounding (the Sequential fuses and chunks; the Graph does not).
func TestGraphChainMatchesSequential(t *testing.T) {
	for _, specs := range [][]LayerSpec{
		// Fused conv → ReLU → max-pool, then batch normalisation.
		{Conv2D{Filters: 4, Kernel: 3}, Activation{"relu"}, MaxPooling2D{Size: 2}, BatchNormalization{},
			Flatten{}, Dense{Units: 8}, Activation{"tanh"}, Dense{Units: 3}, Activation{"softmax"}},
		// The Sequential runs the conv and ReLU a chunk at a time, then
		// normalises the whole batch; dropout draws the same masks.
		{Conv2D{Filters: 3, Kernel: 3, Padding: Same}, Activation{"relu"}, BatchNormalization{NoScale: true},
			Flatten{}, Dropout{Rate: 0.3}, Dense{Units: 3}},
	} {
		chainMatches(t, specs)
	}
}

// chainMatches compares specs built as a Graph and as a Sequential.
func chainMatches(t *testing.T, specs []LayerSpec) {
	t.Helper()
	in := Shape{H: 8, W: 8, C: 2}
	var nodes []Node
	for i, s := range specs {
		nodes = append(nodes, Node{s, []int{i - 1}})
	}
	g, err := NewGraph("chain", in, 7, 2, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSequential("chain", in, 7, 2, specs...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Params(), s.Params()) {
		t.Fatal("a chain's Graph and Sequential differ in their parameters")
	}
	x, labels := testBatch(3, 5, g.InputDim(), 3)
	lg, err1 := g.ForwardBackward(x, labels, 5)
	ls, err2 := s.ForwardBackward(x, labels, 5)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if math.Abs(lg-ls) > 1e-5 {
		t.Errorf("loss %v as a graph, %v as a chain", lg, ls)
	}
	for i := range g.Grads() {
		if a, b := g.Grads()[i], s.Grads()[i]; math.Abs(float64(a-b)) > 1e-4*(1+math.Abs(float64(b))) {
			t.Fatalf("gradient %d: %v as a graph, %v as a chain", i, a, b)
		}
	}
	for i := range g.Buffers() {
		if a, b := g.Buffers()[i], s.Buffers()[i]; math.Abs(float64(a-b)) > 1e-5 {
			t.Fatalf("buffer %d: %v as a graph, %v as a chain", i, a, b)
		}
	}
	if !slices.EqualFunc(g.Tensors(), s.Tensors(), func(a, b ParamTensor) bool { return a.Name == b.Name && a.Offset == b.Offset }) {
		t.Errorf("tensors %v as a graph, %v as a chain", g.Tensors(), s.Tensors())
	}
}

// TestGraphDeterminism: GOMAXPROCS changes no bit of a graph's loss,
// gradient or buffers.
func TestGraphDeterminism(t *testing.T) {
	run := func(procs int) (float64, []float32, []float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		g, err := NewGraph("res", Shape{H: 6, W: 6, C: 2}, 11, 3, residualNodes(2, 3)...)
		if err != nil {
			t.Fatal(err)
		}
		x, labels := testBatch(5, 8, g.InputDim(), 3)
		l, err := g.ForwardBackward(x, labels, 8)
		if err != nil {
			t.Fatal(err)
		}
		return l, slices.Clone(g.Grads()), slices.Clone(g.Buffers())
	}
	l1, g1, b1 := run(1)
	l2, g2, b2 := run(2)
	if l1 != l2 || !slices.Equal(g1, g2) || !slices.Equal(b1, b2) {
		t.Error("GOMAXPROCS 1 and 2 differ")
	}
}

// TestGraphArchitecture: a graph's Architecture reads back from its JSON
// (format GraphFormat, each layer's inputs) and builds the same model;
// its buffers are named by node; malformed graphs are errors naming the
// node.
func TestGraphArchitecture(t *testing.T) {
	g, err := NewGraph("res", Shape{H: 4, W: 4, C: 2}, 1, 1, residualNodes(2, 3)...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(g.Architecture())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"format":"meshtrain-graph/1"`) || !strings.Contains(string(b), `{"type":"add","inputs":[4,-1]}`) {
		t.Errorf("JSON %s", b)
	}
	a, err := ParseArchitecture(b)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := g.Architecture().Digest()
	d2, _ := a.Digest()
	chain := g.Architecture()
	chain.Inputs = nil
	d3, _ := chain.Digest()
	if d1 != d2 || d1 == d3 {
		t.Errorf("digests %s, %s read back, %s without the inputs", d1, d2, d3)
	}
	m, err := a.Build(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Params(), g.Params()) {
		t.Error("the graph read back has other parameters")
	}
	var names []string
	for _, bt := range g.BufferTensors() {
		names = append(names, bt.Name)
	}
	if want := []string{"1.running_mean", "1.running_var", "bn2.running_mean", "bn2.running_var"}; !slices.Equal(names, want) {
		t.Errorf("buffers %v, want %v", names, want)
	}
	if _, err := a.New(1, 1); err == nil {
		t.Error("New built a graph as a chain")
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  string
	}{
		{"add_in_a_chain", []Node{{Dense{Units: 3}, []int{-1}}, {Add{}, []int{0}}}, "layer 1 (add): it takes two or more inputs"},
		{"later_input", []Node{{Dense{Units: 3}, []int{1}}, {Dense{Units: 3}, []int{0}}}, "layer 0 (dense): input 1: want −1"},
		{"unused_node", []Node{{Dense{Units: 3}, []int{-1}}, {Dense{Units: 3}, []int{-1}}}, "layer 0 (dense): no later node takes its output"},
		{"shapes_differ", []Node{{Dense{Units: 3}, []int{-1}}, {Add{}, []int{0, -1}}}, "inputs of shapes [3 5]: want one shape"},
		{"two_inputs_to_dense", []Node{{Dense{Units: 3}, []int{-1, -1}}}, "2 inputs: the layer takes one"},
	} {
		_, err := NewGraph(tc.name, Shape{C: 5}, 1, 1, tc.nodes...)
		var le *LayerError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a LayerError with %q", tc.name, err, tc.want)
		}
		arch := Architecture{Name: tc.name, Input: Shape{C: 5}}
		for _, n := range tc.nodes {
			arch.Layers, arch.Inputs = append(arch.Layers, n.Layer), append(arch.Inputs, n.Inputs)
		}
		if _, _, err := arch.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check says %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestGraphAllocs: after the first step, a graph's training step and
// its evaluation allocate nothing.
func TestGraphAllocs(t *testing.T) {
	g, err := NewGraph("res", Shape{H: 6, W: 6, C: 2}, 1, 2, residualNodes(2, 3)...)
	if err != nil {
		t.Fatal(err)
	}
	x, labels := testBatch(1, 16, g.InputDim(), 3)
	step := func() {
		if _, err := g.ForwardBackward(x, labels, 16); err != nil {
			t.Fatal(err)
		}
		if _, _, err := g.Evaluate(x, labels, 16); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(10, step); a != 0 {
		t.Errorf("%v allocations per step", a)
	}
}

// winoConvs counts the convolutions of g's first shard that run on
// Winograd's passes.
func winoConvs(g *Graph) int {
	n := 0
	for _, l := range g.shards[0].layers {
		if c, ok := l.(*conv2D); ok && c.wino != nil {
			n++
		}
	}
	return n
}
