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
type Architecture struct {
	Name   string
	Input  Shape
	Layers []LayerSpec
}

// ArchitectureFormat is the "format" of an Architecture's JSON.
const ArchitectureFormat = "meshtrain-sequential/1"

// Architecture returns the definition m was built from. The built-in
// softmax model's tensors are named weight and bias; New names an
// Architecture's by their index (1.weight), as for any other Sequential.
func (m *Sequential) Architecture() Architecture {
	return Architecture{Name: m.name, Input: m.input, Layers: slices.Clone(m.specs)}
}

// New builds the Sequential a defines, as NewSequential does.
func (a Architecture) New(seed int64, shards int) (*Sequential, error) {
	return NewSequential(a.Name, a.Input, seed, shards, a.Layers...)
}

// Limits on what Check accepts, so that reading an architecture never
// allocates without bound: a model of at most MaxParams parameters, each
// layer's output at most maxExample floats per example, and a
// convolution's scratch (its taps and output channels times its padded
// input plane) at most maxConvScratch floats.
const (
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
	m := &Sequential{name: a.Name, input: a.Input, specs: a.Layers}
	c, err := m.compile(true)
	if err != nil {
		return 0, 0, err
	}
	if _, _, err := m.names(c, false); err != nil {
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
	if in.H > maxExample || in.W > maxExample || in.C > maxExample || in.Size() > maxExample {
		return fmt.Errorf("nn: %s: input %v: too large for meshtrain (%d floats at most)", a.Name, in, maxExample)
	}
	params := 0
	for i, s := range a.Layers {
		var out Shape
		switch s := s.(type) {
		case nil:
			return nil
		case Conv2D:
			if in.vector() || s.Filters < 1 || s.Kernel < 1 || s.Strides < 0 {
				return nil
			}
			if s.Filters > maxExample || s.Kernel > maxExample {
				return tooLarge(i, s, "%d filters of %d×%d", s.Filters, s.Kernel, s.Kernel)
			}
			st := max(s.Strides, 1)
			oh, pt, pb, err := window(in.H, s.Kernel, st, s.Padding)
			if err != nil {
				return nil
			}
			ow, pl, pr, err := window(in.W, s.Kernel, st, s.Padding)
			if err != nil {
				return nil
			}
			taps := float64(in.C) * float64(s.Kernel) * float64(s.Kernel)
			plane := float64(in.H+pt+pb) * float64(in.W+pl+pr)
			if scratch := (taps + float64(s.Filters) + 2) * plane; scratch > maxConvScratch {
				return tooLarge(i, s, "%d filters of %d×%d over %v need %.3g floats of scratch (%d at most)", s.Filters, s.Kernel, s.Kernel, in, scratch, maxConvScratch)
			}
			if w := taps*float64(s.Filters) + float64(s.Filters); w > MaxParams {
				return tooLarge(i, s, "%.3g parameters (%d at most)", w, MaxParams)
			}
			params += int(taps)*s.Filters + s.Filters
			out = Shape{H: oh, W: ow, C: s.Filters}
		case MaxPooling2D, AveragePooling2D:
			size, strides, pad := poolOf(s)
			if in.vector() || size < 1 || strides < 0 {
				return nil
			}
			if size > maxExample {
				return tooLarge(i, s, "pool %d×%d", size, size)
			}
			st := strides
			if st == 0 {
				st = size
			}
			oh, _, _, err := window(in.H, size, st, pad)
			if err != nil {
				return nil
			}
			ow, _, _, err := window(in.W, size, st, pad)
			if err != nil {
				return nil
			}
			out = Shape{H: oh, W: ow, C: in.C}
		case Dense:
			if !in.vector() || s.Units < 1 {
				return nil
			}
			if w := float64(in.C)*float64(s.Units) + float64(s.Units); s.Units > maxExample || w > MaxParams {
				return tooLarge(i, s, "%d units over %d inputs: %.3g parameters (%d at most)", s.Units, in.C, w, MaxParams)
			}
			params += in.C*s.Units + s.Units
			out = Shape{C: s.Units}
		default: // the others allocate nothing in build
			_, o, err := s.build(in)
			if err != nil {
				return nil
			}
			out = o
		}
		if out.H > maxExample || out.W > maxExample || out.Size() > maxExample {
			return tooLarge(i, s, "an output of %v (%d floats at most)", out, maxExample)
		}
		if params > MaxParams {
			return tooLarge(i, s, "the model has %d parameters by here (%d at most)", params, MaxParams)
		}
		in = out
	}
	return nil
}

// poolOf is a pooling spec's size, strides and padding.
func poolOf(s LayerSpec) (size, strides int, p Padding) {
	switch s := s.(type) {
	case MaxPooling2D:
		return s.Size, s.Strides, s.Padding
	case AveragePooling2D:
		return s.Size, s.Strides, s.Padding
	}
	panic("nn: not a pooling spec")
}

// Digest identifies a's input and layers (not its name): the first 16
// hex digits of the SHA-256 of their canonical JSON. Models with equal
// digests compute the same function of the same parameters, and are
// initialised alike.
func (a Architecture) Digest() (string, error) {
	raws, err := layersJSON(a.Layers)
	if err != nil {
		return "", fmt.Errorf("nn: architecture %s: %w", a.Name, err)
	}
	b, err := json.Marshal(archJSON{Format: ArchitectureFormat, Input: a.Input, Layers: raws})
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
	raws, err := layersJSON(a.Layers)
	if err != nil {
		return nil, fmt.Errorf("nn: architecture %s: %w", a.Name, err)
	}
	return json.Marshal(archJSON{Format: ArchitectureFormat, Name: a.Name, Input: a.Input, Layers: raws})
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

// The layers' JSON.
type (
	conv2DJSON struct {
		Type       string       `json:"type"`
		Filters    int          `json:"filters"`
		Kernel     int          `json:"kernel"`
		Strides    int          `json:"strides"`
		Padding    string       `json:"padding"`
		Init       string       `json:"init"`
		KernelInit *Initializer `json:"kernel_initializer,omitempty"`
		BiasInit   *Initializer `json:"bias_initializer,omitempty"`
		Name       string       `json:"name,omitempty"`
	}
	poolJSON struct {
		Type    string `json:"type"`
		Size    int    `json:"size"`
		Strides int    `json:"strides"`
		Padding string `json:"padding"`
	}
	denseJSON struct {
		Type       string       `json:"type"`
		Units      int          `json:"units"`
		Init       string       `json:"init"`
		KernelInit *Initializer `json:"kernel_initializer,omitempty"`
		BiasInit   *Initializer `json:"bias_initializer,omitempty"`
		Name       string       `json:"name,omitempty"`
	}
	dropoutJSON struct {
		Type string  `json:"type"`
		Rate float64 `json:"rate"`
	}
	activationJSON struct {
		Type string `json:"type"`
		Fn   string `json:"fn"`
	}
	reshapeJSON struct {
		Type string `json:"type"`
		To   Shape  `json:"to"`
	}
	typeJSON struct {
		Type string `json:"type"`
	}
)

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

// layerJSON is one layer spec's canonical JSON.
func layerJSON(s LayerSpec) (json.RawMessage, error) {
	var v any
	switch s := s.(type) {
	case Conv2D:
		init, err := initName(s.Init)
		if err != nil {
			return nil, err
		}
		v = conv2DJSON{Type: s.kind(), Filters: s.Filters, Kernel: s.Kernel, Strides: max(s.Strides, 1), Padding: s.Padding.String(),
			Init: init, KernelInit: s.KernelInit, BiasInit: s.BiasInit, Name: s.Name}
	case MaxPooling2D, AveragePooling2D:
		size, strides, pad := poolOf(s)
		if strides == 0 {
			strides = size
		}
		v = poolJSON{Type: s.kind(), Size: size, Strides: strides, Padding: pad.String()}
	case Dense:
		init, err := initName(s.Init)
		if err != nil {
			return nil, err
		}
		v = denseJSON{Type: s.kind(), Units: s.Units, Init: init, KernelInit: s.KernelInit, BiasInit: s.BiasInit, Name: s.Name}
	case Dropout:
		v = dropoutJSON{Type: s.kind(), Rate: s.Rate}
	case Activation:
		v = activationJSON{Type: "activation", Fn: s.Fn}
	case Reshape:
		v = reshapeJSON{Type: s.kind(), To: s.To}
	case Flatten:
		v = typeJSON{Type: s.kind()}
	default:
		return nil, fmt.Errorf("layer spec %T: not one of nn's", s)
	}
	b, err := json.Marshal(v)
	return b, err
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
	if j.Format != ArchitectureFormat {
		return fmt.Errorf("nn: architecture: format %q: want %q", j.Format, ArchitectureFormat)
	}
	out := Architecture{Name: j.Name, Input: j.Input}
	for i, raw := range j.Layers {
		s, err := parseLayer(raw)
		if err != nil {
			return fmt.Errorf("nn: architecture %s: layer %d: %w", j.Name, i, err)
		}
		out.Layers = append(out.Layers, s)
	}
	*a = out
	return nil
}

// parseLayer reads one layer's JSON.
func parseLayer(raw json.RawMessage) (LayerSpec, error) {
	var t typeJSON
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "conv2d":
		var j conv2DJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		init, err := parseInit(j.Init)
		if err != nil {
			return nil, err
		}
		pad, err := parsePadding(j.Padding)
		if err != nil {
			return nil, err
		}
		return Conv2D{Filters: j.Filters, Kernel: j.Kernel, Strides: j.Strides, Padding: pad, Init: init, KernelInit: j.KernelInit, BiasInit: j.BiasInit, Name: j.Name}, nil
	case "max_pooling2d", "average_pooling2d":
		var j poolJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		pad, err := parsePadding(j.Padding)
		if err != nil {
			return nil, err
		}
		if t.Type == "max_pooling2d" {
			return MaxPooling2D{Size: j.Size, Strides: j.Strides, Padding: pad}, nil
		}
		return AveragePooling2D{Size: j.Size, Strides: j.Strides, Padding: pad}, nil
	case "dense":
		var j denseJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		init, err := parseInit(j.Init)
		if err != nil {
			return nil, err
		}
		return Dense{Units: j.Units, Init: init, KernelInit: j.KernelInit, BiasInit: j.BiasInit, Name: j.Name}, nil
	case "dropout":
		var j dropoutJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		return Dropout{Rate: j.Rate}, nil
	case "activation":
		var j activationJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		return Activation{Fn: j.Fn}, nil
	case "reshape":
		var j reshapeJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		return Reshape{To: j.To}, nil
	case "flatten":
		var j typeJSON
		if err := strict(raw, &j); err != nil {
			return nil, err
		}
		return Flatten{}, nil
	}
	return nil, fmt.Errorf("type %q: want one of conv2d, max_pooling2d, average_pooling2d, flatten, reshape, dense, dropout, activation", t.Type)
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
