package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// Embedding maps a vector of L token ids to a sequence of L steps of
// OutputDim channels, step t being row id_t of a table of InputDim rows
// (Keras's Embedding, PyTorch's Embedding). Its input is the model's own
// (a vector of L floats, each an integer id in [0, InputDim), as the
// data sets of token sequences give them); its output is the sequence
// 1×L×OutputDim, laid out planar, OutputDim×L (see Shape).
//
// Its one tensor is weight [InputDim OutputDim], row id the embedding of
// token id: PyTorch's Embedding.weight and Keras's embeddings, the same
// floats. Ids get no gradient (Backward writes zeros to dx).
//
// An id that is not an integer in [0, InputDim) is an error of the
// model's ForwardBackward and Evaluate, found before any pass (as Keras
// fails on it), naming the example and position; so that an Embedding
// only ever reads ids a model checked, it must be the model's first
// computing layer (a graph's node on the model's input).
type Embedding struct {
	InputDim, OutputDim int
	// Init draws the table; nil is Keras's default, RandomUniform(−0.05,
	// 0.05), which the JSON writes out.
	Init *Initializer
	Name string // the tensor's prefix; "" for the layer's index
}

// maxVocab bounds InputDim: a float32 holds every integer up to 2²⁴
// exactly, and no id past it.
const maxVocab = 1 << 24

// defaultEmbeddingInit is Keras's embeddings_initializer, "uniform".
var defaultEmbeddingInit = Initializer{Kind: InitRandomUniform, Min: -0.05, Max: 0.05}

func (Embedding) kind() string   { return "embedding" }
func (e Embedding) name() string { return e.Name }

// embeddingJSON is Embedding's JSON.
type embeddingJSON struct {
	Type      string       `json:"type"`
	InputDim  int          `json:"input_dim"`
	OutputDim int          `json:"output_dim"`
	Init      *Initializer `json:"embeddings_initializer"`
	Name      string       `json:"name,omitempty"`
}

func init() {
	register("embedding", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j embeddingJSON) (LayerSpec, error) {
			return Embedding{InputDim: j.InputDim, OutputDim: j.OutputDim, Init: j.Init, Name: j.Name}, nil
		})
	})
}

func (e Embedding) init() *Initializer {
	if e.Init == nil {
		i := defaultEmbeddingInit
		return &i
	}
	return e.Init
}

func (e Embedding) encode() (any, error) {
	return embeddingJSON{Type: e.kind(), InputDim: e.InputDim, OutputDim: e.OutputDim, Init: e.init(), Name: e.Name}, nil
}

// check returns the output shape for input in.
func (e Embedding) check(in Shape) (Shape, error) {
	if !in.vector() {
		return Shape{}, fmt.Errorf("the input is %v: an Embedding takes a vector of token ids, the model's input", in)
	}
	if e.InputDim < 1 || e.OutputDim < 1 || e.InputDim > maxVocab {
		return Shape{}, fmt.Errorf("input_dim %d, output_dim %d: want both at least 1 and input_dim at most %d (ids beyond are not exact in float32)", e.InputDim, e.OutputDim, maxVocab)
	}
	return Shape{H: 1, W: in.C, C: e.OutputDim}, nil
}

func (e Embedding) build(in Shape) (layer, Shape, error) {
	out, err := e.check(in)
	if err != nil {
		return nil, Shape{}, err
	}
	if err := checkInits(e.Init, nil); err != nil {
		return nil, Shape{}, fmt.Errorf("embeddings: %w", err)
	}
	return &embedding{Vocab: e.InputDim, Dim: e.OutputDim, L: in.C, TableInit: *e.init()}, out, nil
}

// bound: the table grows with input_dim × output_dim, the output with L
// × output_dim.
func (e Embedding) bound(in Shape) (Shape, int, bool, error) {
	out, err := e.check(in)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	if w := float64(e.InputDim) * float64(e.OutputDim); w > MaxParams || e.OutputDim > maxExample {
		return Shape{}, 0, false, fmt.Errorf("a table of %d × %d: %.3g parameters (%d at most)", e.InputDim, e.OutputDim, w, MaxParams)
	}
	if s := float64(in.C) * float64(e.OutputDim); s > maxExample {
		return Shape{}, 0, false, fmt.Errorf("%d steps of %d: an output of %.3g floats (%d at most)", in.C, e.OutputDim, s, maxExample)
	}
	return out, e.InputDim * e.OutputDim, true, nil
}

// embedding looks up L ids per example in a table of Vocab rows of Dim.
type embedding struct {
	Vocab, Dim, L int
	TableInit     Initializer

	w, dw []float32
}

// tokenReader is a layer whose input is token ids: a model checks the
// ids of every batch (checkIDs) before any pass, and refuses such a
// layer anywhere but on its input.
type tokenReader interface{ vocab() int }

func (l *embedding) vocab() int           { return l.Vocab }
func (l *embedding) InSize() int          { return l.L }
func (l *embedding) OutSize() int         { return l.Dim * l.L }
func (l *embedding) NumParams() int       { return l.Vocab * l.Dim }
func (l *embedding) ParamShapes() [][]int { return [][]int{{l.Vocab, l.Dim}} }
func (l *embedding) paramNames() []string { return []string{"weight"} }
func (l *embedding) reads() (x, y bool)   { return true, false }

func (l *embedding) Bind(params, grads []float32) {
	n := l.NumParams()
	l.w, l.dw = params[:n:n], grads[:n:n]
}

// Init draws the table; the fans are Keras's for an embedding's (its
// input_dim and output_dim).
func (l *embedding) Init(rng *rand.Rand) { l.TableInit.fill(rng, l.w, l.Vocab, l.Dim) }

// id is v as a row of the table, ok false when v is not an integer in
// [0, Vocab).
func (l *embedding) id(v float32) (int, bool) {
	if !(v >= 0 && v < float32(l.Vocab)) || v != float32(math.Trunc(float64(v))) {
		return 0, false
	}
	return int(v), true
}

// Forward writes each step's row, transposed into the planar output. A
// bad id, which a model never passes (see Embedding), gives a step of
// zeros rather than a panic.
func (l *embedding) Forward(y, x []float32, n int) {
	for e := 0; e < n; e++ {
		ye := y[e*l.Dim*l.L : (e+1)*l.Dim*l.L]
		for t, v := range x[e*l.L : (e+1)*l.L] {
			id, ok := l.id(v)
			if !ok {
				for d := 0; d < l.Dim; d++ {
					ye[d*l.L+t] = 0
				}
				continue
			}
			for d, w := range l.w[id*l.Dim : (id+1)*l.Dim] {
				ye[d*l.L+t] = w
			}
		}
	}
}

func (l *embedding) Backward(dx, dy, x, _ []float32, n int) {
	for e := 0; e < n; e++ {
		de := dy[e*l.Dim*l.L : (e+1)*l.Dim*l.L]
		for t, v := range x[e*l.L : (e+1)*l.L] {
			id, ok := l.id(v)
			if !ok {
				continue
			}
			row := l.dw[id*l.Dim : (id+1)*l.Dim]
			for d := range row {
				row[d] += de[d*l.L+t]
			}
		}
	}
	if dx != nil {
		clear(dx[:n*l.L])
	}
}

// checkIDs reports the first of a batch's n examples of dim floats that
// is not a token id in [0, vocab): a model with an Embedding on its
// input calls it before any pass.
func checkIDs(model string, vocab, dim int, x []float32, n int) error {
	l := embedding{Vocab: vocab}
	for i, v := range x[:n*dim] {
		if _, ok := l.id(v); !ok {
			return fmt.Errorf("nn: %s: example %d, position %d is %v, not a token id in [0, %d): the model's Embedding takes integer ids below its input_dim (map unknown tokens to an id of their own, or raise input_dim)",
				model, i/dim, i%dim, v, vocab)
		}
	}
	return nil
}
