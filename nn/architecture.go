package nn

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Architecture is a Sequential's definition as data: its name, the shape
// of one input and its layers. NewSequential builds it (New); its JSON
// (MarshalJSON, ArchitectureFormat) is meshtrain's canonical form of a
// model, which checkpoints record and peers compare (Digest), and which
// ParseArchitecture reads back.
//
// The JSON names each layer by its kind and options, every option
// written out (a stride of 0 as the stride it stands for):
//
//	{"format": "meshtrain-sequential/1", "name": "cnn", "input": [28, 28, 1], "layers": [
//	  {"type": "conv2d", "filters": 32, "kernel": 3, "strides": 1, "padding": "valid", "init": "he",
//	   "kernel_initializer": {"kind": "variance_scaling", "scale": 1, "mode": "fan_avg", "distribution": "uniform"},
//	   "bias_initializer": {"kind": "constant", "value": 0}},
//	  {"type": "activation", "fn": "relu"},
//	  {"type": "max_pooling2d", "size": 2, "strides": 2, "padding": "valid"},
//	  {"type": "dropout", "rate": 0.25},
//	  {"type": "flatten"},
//	  {"type": "dense", "units": 10, "init": "glorot"},
//	  {"type": "activation", "fn": "softmax"}]}
//
// An input is [H, W, C] for an image and [C] for a vector; a Reshape's
// "to" likewise.
//
// A graph (Graph) is an Architecture with Inputs: Inputs[i] are the
// nodes layer i takes (see Node). Its JSON has the format GraphFormat and
// each layer's object an "inputs" list; a chain's JSON, without Inputs,
// is as it always was, so its Digest is too.
type Architecture struct {
	Name   string
	Input  Shape
	Layers []LayerSpec
	// Inputs, when not nil, makes the layers a graph's nodes: Inputs[i]
	// are the earlier layers layer i takes, −1 the model's input.
	Inputs [][]int
}

// ArchitectureFormat is the "format" of an Architecture's JSON.
const ArchitectureFormat = "meshtrain-sequential/1"

// Architecture returns the definition m was built from. The built-in
// softmax model's tensors are named weight and bias; New names an
// Architecture's by their index (1.weight), as for any other Sequential.
func (m *Sequential) Architecture() Architecture {
	return Architecture{Name: m.name, Input: m.input, Layers: slices.Clone(m.specs)}
}

// New builds the Sequential a defines, as NewSequential does; a graph
// (Inputs set) is built by Build.
func (a Architecture) New(seed int64, shards int) (*Sequential, error) {
	if a.Inputs != nil {
		return nil, fmt.Errorf("nn: %s: a graph, not a chain: build it with Build", a.Name)
	}
	return NewSequential(a.Name, a.Input, seed, shards, a.Layers...)
}

// Build builds the model a defines: a Sequential for a chain, a Graph
// when Inputs is set.
func (a Architecture) Build(seed int64, shards int) (Model, error) {
	if a.Inputs == nil {
		return a.New(seed, shards)
	}
	nodes, err := a.nodes()
	if err != nil {
		return nil, err
	}
	return NewGraph(a.Name, a.Input, seed, shards, nodes...)
}

// Limits on what Check accepts, so that reading an architecture never
// allocates without bound: a model of at most MaxParams parameters, each
// layer's output at most maxExample floats per example, and a
// convolution's scratch (its taps and output channels times its padded
// input plane) at most maxConvScratch floats.
//
// MaxLayers bounds the layer count: the deepest of Keras's application
// models (NASNetLarge) has 1,041 layers, and each layer costs memory and
// a goroutine-free pass of its own (a file of 2,000 Dropout layers after
// a Dense of 65,536 took the machine).
const (
	MaxLayers      = 2048
	MaxParams      = 1 << 28
	maxExample     = 1 << 24
	maxConvScratch = 1 << 26
)

// Check reports whether a's layers compose for its input: nil, or the
// error New would return (a *LayerError for a layer), without allocating
// the model or its parameters. It returns the number of classes the
// model scores (2 for one output and a sigmoid) and of parameters.
func (a Architecture) Check() (classes, params int, err error) {
	if !a.Input.valid() {
		return 0, 0, fmt.Errorf("nn: %s: input shape %+v: want H, W, C ≥ 1 for an image or H = W = 0 and C ≥ 1 for a vector", a.Name, a.Input)
	}
	if err := a.bounds(); err != nil {
		return 0, 0, err
	}
	if a.Inputs != nil {
		nodes, err := a.nodes()
		if err != nil {
			return 0, 0, err
		}
		g := newGraph(a.Name, a.Input, nodes)
		params, err := g.check()
		return g.classes, params, err
	}
	m := &Sequential{name: a.Name, input: a.Input, specs: a.Layers}
	c, err := m.compile(true)
	if err != nil {
		return 0, 0, err
	}
	if _, _, _, err := m.names(c, false); err != nil {
		return 0, 0, err
	}
	for _, l := range c.layers {
		params += l.NumParams()
	}
	if params == 0 {
		return 0, 0, fmt.Errorf("nn: %s: no layer has parameters", a.Name)
	}
	return m.classes, params, nil
}

// bounds walks a's shapes as far as they can be inferred cheaply and
// refuses a model past the limits (see MaxParams); compile reports any
// other problem.
func (a Architecture) bounds() error {
	in := a.Input
	tooLarge := func(i int, s LayerSpec, format string, args ...any) error {
		return &LayerError{Model: a.Name, Index: i, Kind: s.kind(), Err: fmt.Errorf("too large for meshtrain: "+format, args...)}
	}
	if len(a.Layers) > MaxLayers {
		return fmt.Errorf("nn: %s: %d layers, more than meshtrain's %d", a.Name, len(a.Layers), MaxLayers)
	}
	if in.H > maxExample || in.W > maxExample || in.C > maxExample || in.Size() > maxExample {
		return fmt.Errorf("nn: %s: input %v: too large for meshtrain (%d floats at most)", a.Name, in, maxExample)
	}
	params := 0
	outs := make([]Shape, len(a.Layers))
	for i, s := range a.Layers {
		if s == nil {
			return nil
		}
		var out Shape
		var p int
		var ok bool
		var err error
		if a.Inputs != nil { // a graph's node: its inputs' shapes
			out, p, ok, err = a.nodeBound(i, outs)
		} else {
			out, p, ok, err = boundOf(s, in)
		}
		if err != nil {
			return tooLarge(i, s, "%v", err)
		}
		if !ok {
			return nil
		}
		params += p
		if out.H > maxExample || out.W > maxExample || out.Size() > maxExample {
			return tooLarge(i, s, "an output of %v (%d floats at most)", out, maxExample)
		}
		if params > MaxParams {
			return tooLarge(i, s, "the model has %d parameters by here (%d at most)", params, MaxParams)
		}
		in, outs[i] = out, out
	}
	return nil
}

// Digest identifies a's input and layers (not its name): the first 16
// hex digits of the SHA-256 of their canonical JSON. Models with equal
// digests compute the same function of the same parameters, and are
// initialised alike.
func (a Architecture) Digest() (string, error) {
	j, err := a.toJSON()
	if err != nil {
		return "", err
	}
	j.Name = ""
	b, err := json.Marshal(j)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16], nil
}

// archJSON is an Architecture's JSON.
type archJSON struct {
	Format string            `json:"format"`
	Name   string            `json:"name,omitempty"`
	Input  Shape             `json:"input"`
	Layers []json.RawMessage `json:"layers"`
}

// layersJSON returns each layer's JSON.
func layersJSON(specs []LayerSpec) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(specs))
	for i, s := range specs {
		b, err := layerJSON(s)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// MarshalJSON writes a's canonical JSON. A layer spec of a type nn does
// not define is an error.
func (a Architecture) MarshalJSON() ([]byte, error) {
	j, err := a.toJSON()
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// MarshalJSON writes s as [H, W, C], or [C] for a vector.
func (s Shape) MarshalJSON() ([]byte, error) {
	if s.vector() {
		return json.Marshal([]int{s.C})
	}
	return json.Marshal([]int{s.H, s.W, s.C})
}

// UnmarshalJSON reads [H, W, C] or [C]; Reshape's −1 is kept.
func (s *Shape) UnmarshalJSON(b []byte) error {
	var d []int
	if err := json.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("shape %s: want [H, W, C] or [C]", b)
	}
	switch len(d) {
	case 1:
		*s = Shape{C: d[0]}
	case 3:
		*s = Shape{H: d[0], W: d[1], C: d[2]}
		if s.vector() {
			return fmt.Errorf("shape %v: an image of no rows and columns", d)
		}
	default:
		return fmt.Errorf("shape %v: want [H, W, C] or [C]", d)
	}
	return nil
}

// initNames are the Init kinds' names in JSON.
var initNames = map[Init]string{He: "he", Glorot: "glorot", Torch: "torch"}

func initName(i Init) (string, error) {
	if n, ok := initNames[i]; ok {
		return n, nil
	}
	return "", fmt.Errorf("init %d: not one of nn's", int(i))
}

func parseInit(s string) (Init, error) {
	for i, n := range initNames {
		if n == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("init %q: want he, glorot or torch", s)
}

func parsePadding(s string) (Padding, error) {
	switch s {
	case "valid":
		return Valid, nil
	case "same":
		return Same, nil
	}
	return 0, fmt.Errorf("padding %q: want valid or same", s)
}

// ParseArchitecture reads an Architecture's JSON strictly (the format
// ArchitectureFormat, no field it does not define, every value of its
// type) and checks it (Check): what it returns, New builds.
func ParseArchitecture(b []byte) (Architecture, error) {
	var a Architecture
	if err := json.Unmarshal(b, &a); err != nil {
		return Architecture{}, err
	}
	if _, _, err := a.Check(); err != nil {
		return Architecture{}, err
	}
	return a, nil
}

// strict decodes b into v, refusing fields v does not have and anything
// after the value.
func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// UnmarshalJSON reads an Architecture's JSON (not checked: see
// ParseArchitecture).
func (a *Architecture) UnmarshalJSON(b []byte) error {
	var j archJSON
	if err := strict(b, &j); err != nil {
		return fmt.Errorf("nn: architecture: %w", err)
	}
	if j.Format != ArchitectureFormat && j.Format != GraphFormat {
		return fmt.Errorf("nn: architecture: format %q: want %q (or %q for a graph)", j.Format, ArchitectureFormat, GraphFormat)
	}
	out := Architecture{Name: j.Name, Input: j.Input}
	for i, raw := range j.Layers {
		if j.Format == GraphFormat {
			ins, rest, err := splitInputs(raw)
			if err != nil {
				return fmt.Errorf("nn: architecture %s: layer %d: %w", j.Name, i, err)
			}
			out.Inputs, raw = append(out.Inputs, ins), rest
		}
		s, err := parseLayer(raw)
		if err != nil {
			return fmt.Errorf("nn: architecture %s: layer %d: %w", j.Name, i, err)
		}
		out.Layers = append(out.Layers, s)
	}
	*a = out
	return nil
}

// initJSON is an Initializer's JSON: its kind and the fields of that
// kind, named as Keras's config keys name them.
type initJSON struct {
	Kind         string   `json:"kind"`
	Value        *float64 `json:"value,omitempty"`
	Min          *float64 `json:"minval,omitempty"`
	Max          *float64 `json:"maxval,omitempty"`
	Mean         *float64 `json:"mean,omitempty"`
	Stddev       *float64 `json:"stddev,omitempty"`
	Scale        *float64 `json:"scale,omitempty"`
	Mode         *string  `json:"mode,omitempty"`
	Distribution *string  `json:"distribution,omitempty"`
}

// initFields are the JSON fields of each kind.
var initFields = map[string][]string{
	InitConstant:        {"value"},
	InitRandomUniform:   {"minval", "maxval"},
	InitRandomNormal:    {"mean", "stddev"},
	InitTruncatedNormal: {"mean", "stddev"},
	InitVarianceScaling: {"scale", "mode", "distribution"},
}

// MarshalJSON writes i's kind and that kind's fields.
func (i Initializer) MarshalJSON() ([]byte, error) {
	if err := i.Check(); err != nil {
		return nil, err
	}
	j := initJSON{Kind: i.kind()}
	switch j.Kind {
	case InitConstant:
		j.Value = &i.Value
	case InitRandomUniform:
		j.Min, j.Max = &i.Min, &i.Max
	case InitRandomNormal, InitTruncatedNormal:
		j.Mean, j.Stddev = &i.Mean, &i.Stddev
	case InitVarianceScaling:
		j.Scale, j.Mode, j.Distribution = &i.Scale, &i.Mode, &i.Distribution
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes: every field of the kind,
// and no other.
func (i *Initializer) UnmarshalJSON(b []byte) error {
	var j initJSON
	if err := strict(b, &j); err != nil {
		return fmt.Errorf("initializer: %w", err)
	}
	want, ok := initFields[j.Kind]
	if !ok {
		return Initializer{Kind: j.Kind}.Check()
	}
	set := map[string]bool{"value": j.Value != nil, "minval": j.Min != nil, "maxval": j.Max != nil, "mean": j.Mean != nil,
		"stddev": j.Stddev != nil, "scale": j.Scale != nil, "mode": j.Mode != nil, "distribution": j.Distribution != nil}
	for name, isSet := range set {
		if isSet != slices.Contains(want, name) {
			return fmt.Errorf("%s initializer: want the fields %s and no other", j.Kind, strings.Join(want, ", "))
		}
	}
	out := Initializer{Kind: j.Kind}
	f := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	switch j.Kind {
	case InitConstant:
		out.Value = f(j.Value)
	case InitRandomUniform:
		out.Min, out.Max = f(j.Min), f(j.Max)
	case InitRandomNormal, InitTruncatedNormal:
		out.Mean, out.Stddev = f(j.Mean), f(j.Stddev)
	case InitVarianceScaling:
		out.Scale, out.Mode, out.Distribution = f(j.Scale), *j.Mode, *j.Distribution
	}
	if err := out.Check(); err != nil {
		return err
	}
	*i = out
	return nil
}
