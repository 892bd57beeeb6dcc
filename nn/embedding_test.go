package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestEmbeddingGradients: the table's gradient against central finite
// differences of Σ dy·Forward(ids) (exact up to rounding: the output is
// the table's entries), ids repeating within and across examples; the
// ids get a zero gradient; with dx nil the table's gradient is the same,
// added to what the buffer held.
func TestEmbeddingGradients(t *testing.T) {
	const n, vocab, dim, steps = 3, 6, 4, 5
	l, out, err := Embedding{InputDim: vocab, OutputDim: dim}.build(vectorShape(steps))
	if err != nil {
		t.Fatal(err)
	}
	if out != imageShape(1, steps, dim) {
		t.Fatalf("output %v, want 1×%d×%d", out, steps, dim)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	params, grads := make([]float32, l.NumParams()), make([]float32, l.NumParams())
	l.Bind(params, grads)
	l.Init(rng)
	for _, v := range params {
		if v < -0.05 || v >= 0.05 {
			t.Fatalf("initial entry %v outside Keras's uniform(−0.05, 0.05)", v)
		}
	}
	x := make([]float32, n*steps)
	for i := range x {
		x[i] = float32(rng.IntN(vocab - 1)) // the last row is never read
	}
	w := randSlice(rng, n*l.OutSize())
	y := make([]float32, n*l.OutSize())
	loss := func() float64 { l.Forward(y, x, n); return project(w, y) }
	loss()
	for e := 0; e < n; e++ { // planar: step t of channel d at d·L + t
		for tt := 0; tt < steps; tt++ {
			for d := 0; d < dim; d++ {
				if got, want := y[e*dim*steps+d*steps+tt], params[int(x[e*steps+tt])*dim+d]; got != want {
					t.Fatalf("example %d step %d channel %d: %v, want row %v's %v", e, tt, d, got, x[e*steps+tt], want)
				}
			}
		}
	}
	dx := make([]float32, len(x))
	for i := range dx {
		dx[i] = float32(math.NaN())
	}
	l.Backward(dx, w, x, y, n)
	for i, v := range dx {
		if v != 0 {
			t.Fatalf("id %d's gradient %v, want 0", i, v)
		}
	}
	const eps = 1e-2
	for i := range params {
		old := params[i]
		params[i] = old + eps
		up := loss()
		params[i] = old - eps
		down := loss()
		params[i] = old
		if num := (up - down) / (2 * eps); math.Abs(num-float64(grads[i])) > 1e-4*(1+math.Abs(num)) {
			t.Errorf("table gradient %d: backward %v, finite difference %v", i, grads[i], num)
		}
	}
	if row := grads[(vocab-1)*dim:]; row[0] != 0 || row[dim-1] != 0 {
		t.Errorf("the row no id reads has gradient %v", row)
	}
	again := make([]float32, len(grads))
	for i := range again {
		again[i] = 1
	}
	l.Bind(params, again)
	l.Backward(nil, w, x, y, n)
	for i := range again {
		if math.Abs(float64(again[i]-1-grads[i])) > 1e-6 {
			t.Fatalf("gradient %d with dx nil added to 1: %v, want %v", i, again[i], 1+grads[i])
		}
	}
}

// TestEmbeddingIDs: a batch with an id that is not an integer in [0,
// input_dim) is refused by ForwardBackward and Evaluate before any pass,
// naming the example and position, in a chain and a graph; an Embedding
// anywhere but on the input is refused; Forward on a bad id (which no
// model passes it) writes zeros rather than panicking.
func TestEmbeddingIDs(t *testing.T) {
	layers := []LayerSpec{Embedding{InputDim: 5, OutputDim: 3}, GlobalAveragePooling1D{}, Dense{Units: 2}}
	seq, err := NewSequential("text", vectorShape(4), 1, 2, layers...)
	if err != nil {
		t.Fatal(err)
	}
	graph, err := NewGraph("text", vectorShape(4), 1, 2, Node{layers[0], []int{-1}}, Node{layers[1], []int{0}}, Node{layers[2], []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	labels := []int32{0, 1}
	for _, m := range []Model{seq, graph} {
		good := []float32{0, 1, 2, 3, 4, 4, 0, 1}
		if _, err := m.ForwardBackward(good, labels, 2); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		for _, bad := range []float32{5, -1, 2.5, float32(math.NaN()), float32(math.Inf(1))} {
			x := []float32{0, 1, 2, 3, 4, 4, bad, 1}
			want := "example 1, position 2 is"
			if _, err := m.ForwardBackward(x, labels, 2); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "[0, 5)") {
				t.Errorf("%T: id %v: error %v, want one containing %q", m, bad, err, want)
			}
			if _, _, err := m.Evaluate(x, labels, 2); err == nil {
				t.Errorf("%T: Evaluate with id %v: no error", m, bad)
			}
		}
	}
	if _, err := NewSequential("late", vectorShape(4), 1, 1, Dropout{Rate: 0.1}, Embedding{InputDim: 5, OutputDim: 3}, GlobalAveragePooling1D{}, Dense{Units: 2}); err == nil ||
		!strings.Contains(err.Error(), "layer 1 (embedding): an Embedding takes token ids") {
		t.Errorf("an Embedding after a Dropout: error %v", err)
	}
	if _, err := NewGraph("late", vectorShape(4), 1, 1, Node{Dense{Units: 4}, []int{-1}}, Node{Embedding{InputDim: 5, OutputDim: 3}, []int{0}},
		Node{GlobalAveragePooling1D{}, []int{1}}, Node{Dense{Units: 2}, []int{2}}); err == nil || !strings.Contains(err.Error(), "an Embedding takes token ids") {
		t.Errorf("an Embedding on a Dense: error %v", err)
	}
	l, _, _ := Embedding{InputDim: 5, OutputDim: 2}.build(vectorShape(3))
	params := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	l.Bind(params, make([]float32, 10))
	y := []float32{9, 9, 9, 9, 9, 9}
	l.Forward(y, []float32{1, 7, -2}, 1)
	if want := []float32{1, 0, 0, 1, 0, 0}; !slices.Equal(y, want) {
		t.Errorf("Forward on ids 1, 7, −2: %v, want %v", y, want)
	}
}
