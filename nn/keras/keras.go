package keras

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/nn"
)

// Model is a Keras model file read as an nn.Architecture.
type Model struct {
	Arch nn.Architecture
	// Form says which of the forms the file is in (see the package doc),
	// and KerasVersion its "keras_version" if it records one.
	Form, KerasVersion string
	// Class is the model's class: Sequential or Functional.
	Class string
	// Layers are the file's layers in the order they run, each with the
	// nn layers it became.
	Layers []Layer
	// Classes and Params are the model's class count (2 for one output
	// and a sigmoid) and parameter count.
	Classes, Params int
	// top is the file's object, topology its TF.js modelTopology: where
	// Training finds the compile settings.
	top, topology map[string]any
}

// Layer is one of the file's layers.
type Layer struct {
	// Index is the layer's position in the file's list of layers (an
	// InputLayer, when listed, counts), Class its class ("Conv2D") and
	// Name its name ("conv2d_1").
	Index       int
	Class, Name string
	// First and End delimit the nn layers it became, [First, End).
	First, End int
}

// The forms of Model.Form.
const (
	FormKeras2    = "tf.keras 2.x to_json"
	FormKeras3    = "Keras 3 to_json"
	FormTFJS      = "TensorFlow.js layers model"
	FormKerasList = "Keras ≤ 2.2 list config"
)

// MaxFileSize bounds the JSON read: a model's architecture is a few
// kilobytes; a larger file is not one.
const MaxFileSize = 16 << 20

// LayerError is the error about one of the file's layers: its index in
// the file's list, class and name, and why.
type LayerError struct {
	Index       int
	Class, Name string
	Err         error
}

func (e *LayerError) Error() string {
	return fmt.Sprintf("layer %d %q (%s): %v", e.Index, e.Name, e.Class, e.Err)
}

func (e *LayerError) Unwrap() error { return e.Err }

// ReadFile reads the model file at path (a regular file: a pipe or FIFO
// is refused by name, see internal/inputfile). Errors start with the
// file's name.
func ReadFile(path string) (*Model, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err // names the file
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse reads a model's JSON in any of the package's forms.
func Parse(b []byte) (*Model, error) {
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%d bytes or more: a Keras model's JSON is a few kilobytes (%d at most here)", len(b), MaxFileSize)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var top any
	if err := d.Decode(&top); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("not JSON: data after the model's object")
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a %s, not a JSON object: want a Keras model's to_json() or a TensorFlow.js model.json", kindOf(top))
	}
	m := &Model{top: obj}
	cfg := obj
	switch {
	case obj["modelTopology"] != nil:
		m.Form = FormTFJS
		topo, ok := obj["modelTopology"].(map[string]any)
		if !ok {
			return nil, errors.New(`"modelTopology" is not an object`)
		}
		cfg, m.topology = topo, topo
		if mc, ok := topo["model_config"]; ok {
			if cfg, ok = mc.(map[string]any); !ok {
				return nil, errors.New(`"modelTopology"."model_config" is not an object`)
			}
		}
		m.KerasVersion, _ = topo["keras_version"].(string)
	case obj["model_config"] != nil:
		if cfg, ok = obj["model_config"].(map[string]any); !ok {
			return nil, errors.New(`"model_config" is not an object`)
		}
	}
	if m.KerasVersion == "" {
		m.KerasVersion, _ = obj["keras_version"].(string)
	}
	if v, ok := cfg["keras_version"].(string); ok && m.KerasVersion == "" {
		m.KerasVersion = v
	}
	class, ok := cfg["class_name"].(string)
	if !ok {
		return nil, errors.New(`no "class_name": want a Keras model's to_json() (class_name Sequential or Functional) or a TensorFlow.js model.json (modelTopology)`)
	}
	if m.Form == "" {
		m.Form = FormKeras2
		if _, ok := cfg["module"]; ok {
			m.Form = FormKeras3
		}
	}
	if _, list := cfg["config"].([]any); list {
		if m.Form != FormTFJS {
			m.Form = FormKerasList
		}
	}
	var err error
	switch class {
	case "Sequential":
		m.Class = "Sequential"
		err = m.sequential(cfg)
	case "Functional", "Model":
		m.Class = "Functional"
		err = m.functional(cfg)
	default:
		return nil, fmt.Errorf("model class %q: meshtrain reads Sequential and Functional models (a subclassed model has no architecture in its JSON)", class)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// kindOf names a JSON value's kind.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return "number"
}

// entry is one layer of the file: its position and its serialised form.
type entry struct {
	index int
	obj   map[string]any
	class string
	name  string
	cfg   map[string]any
}

// entries reads the file's list of layers.
func entries(list []any) ([]entry, error) {
	var out []entry
	for i, v := range list {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("layer %d: a %s, not an object", i, kindOf(v))
		}
		e := entry{index: i, obj: obj}
		e.class, _ = obj["class_name"].(string)
		if e.class == "" {
			return nil, fmt.Errorf("layer %d: no class_name", i)
		}
		cfg, ok := obj["config"].(map[string]any)
		if !ok && obj["config"] != nil {
			return nil, &LayerError{Index: i, Class: e.class, Err: fmt.Errorf("config is a %s, not an object", kindOf(obj["config"]))}
		}
		e.cfg = cfg
		if e.cfg == nil {
			e.cfg = map[string]any{}
		}
		e.name, _ = obj["name"].(string)
		if e.name == "" {
			e.name, _ = e.cfg["name"].(string)
		}
		if j := slices.IndexFunc(out, func(o entry) bool { return o.name == e.name }); j >= 0 && e.name != "" {
			return nil, &LayerError{Index: i, Class: e.class, Name: e.name, Err: fmt.Errorf("the name %q is also layer %d's: Keras refuses a model whose layer names repeat (\"All layer names should be unique.\")", e.name, out[j].index)}
		}
		out = append(out, e)
	}
	return out, nil
}

// sequential reads a Sequential model's config.
func (m *Model) sequential(model map[string]any) error {
	var list []any
	name := "sequential"
	var buildShape any
	switch c := model["config"].(type) {
	case []any:
		list = c
	case map[string]any:
		l, ok := c["layers"].([]any)
		if !ok {
			return errors.New(`the Sequential's config has no "layers" list`)
		}
		list = l
		if n, ok := c["name"].(string); ok && n != "" {
			name = n
		}
		buildShape = c["build_input_shape"]
	default:
		return fmt.Errorf(`the Sequential's "config" is a %s: want an object with "layers" (or Keras ≤ 2.2's list of layers)`, kindOf(model["config"]))
	}
	if buildShape == nil {
		if bc, ok := model["build_config"].(map[string]any); ok {
			buildShape = bc["input_shape"]
		}
	}
	es, err := entries(list)
	if err != nil {
		return err
	}
	return m.build(name, es, buildShape, nil)
}

// build turns the layers, in the order they run, into the architecture.
// buildShape is the model's recorded input shape, used when no layer
// gives one. from, for a graph, are each layer's inputs (indices in es),
// and nil for a chain.
func (m *Model) build(name string, es []entry, buildShape any, from [][]int) error {
	var specs []nn.LayerSpec
	var inputs [][]int           // the nn layers', for a graph
	last := make([]int, len(es)) // the nn layer giving each layer's output; −1 the input
	var input *nn.Shape
	for k, e := range es {
		fail := func(err error) error { return &LayerError{Index: e.index, Class: e.class, Name: e.name, Err: err} }
		if e.class == "InputLayer" {
			if k != 0 {
				return fail(errors.New("an InputLayer after the first layer"))
			}
			s, err := inputLayer(e.cfg)
			if err != nil {
				return fail(err)
			}
			input = &s
			m.Layers = append(m.Layers, Layer{Index: e.index, Class: e.class, Name: e.name, First: len(specs), End: len(specs)})
			last[k] = -1
			continue
		}
		if input == nil {
			// The first layer may carry the input shape (Keras 2's
			// input_shape argument).
			if v, ok := e.cfg["batch_input_shape"]; ok && v != nil {
				s, err := shape(v, true)
				if err != nil {
					return fail(fmt.Errorf("batch_input_shape: %w", err))
				}
				input = &s
			}
		}
		got, err := layerSpecs(e, m.keras3())
		if err != nil {
			return fail(err)
		}
		m.Layers = append(m.Layers, Layer{Index: e.index, Class: e.class, Name: e.name, First: len(specs), End: len(specs) + len(got)})
		if from != nil {
			var first []int
			for _, j := range from[k] {
				first = append(first, last[j])
			}
			inputs = append(inputs, first)
			for i := 1; i < len(got); i++ { // a layer's activation takes it
				inputs = append(inputs, []int{len(specs) + i - 1})
			}
		}
		specs = append(specs, got...)
		last[k] = len(specs) - 1
	}
	if input == nil && buildShape != nil {
		s, err := shape(buildShape, true)
		if err != nil {
			return fmt.Errorf("build_input_shape: %w", err)
		}
		input = &s
	}
	if input == nil {
		return errors.New("no input shape: the file has no InputLayer, batch_input_shape or build_input_shape (give the model an input shape, keras.Input(shape=…), before to_json)")
	}
	if len(specs) == 0 {
		return errors.New("no layers besides the input")
	}
	m.Arch = nn.Architecture{Name: name, Input: sequenceInput(*input, es), Layers: specs, Inputs: inputs}
	classes, params, err := m.Arch.Check()
	var le *nn.LayerError
	if errors.As(err, &le) {
		for _, l := range m.Layers {
			if le.Index >= l.First && le.Index < l.End {
				return &LayerError{Index: l.Index, Class: l.Class, Name: l.Name, Err: le.Err}
			}
		}
	}
	if err != nil {
		return err
	}
	if err := m.lastActivation(); err != nil {
		return err
	}
	m.Classes, m.Params = classes, params
	return nil
}

// lastActivation refuses a model whose last layer is an activation that
// does not fit the loss: meshtrain's loss follows the last activation
// (softmax: categorical cross-entropy; sigmoid: binary cross-entropy;
// none: cross-entropy from the scores as logits), so a relu or a tanh
// there would clip the scores the cross-entropy takes, a model that
// trains badly without a word.
func (m *Model) lastActivation() error {
	n := len(m.Arch.Layers)
	a, ok := m.Arch.Layers[n-1].(nn.Activation)
	if !ok || a.Fn == "softmax" || a.Fn == "sigmoid" {
		return nil
	}
	for _, l := range m.Layers {
		if n-1 >= l.First && n-1 < l.End {
			return &LayerError{Index: l.Index, Class: l.Class, Name: l.Name, Err: fmt.Errorf("the last activation, %s, does not fit the loss: meshtrain's loss follows the last activation "+
				"(softmax: categorical cross-entropy; sigmoid: binary cross-entropy; none: cross-entropy from logits); end with softmax, sigmoid or no activation", a.Fn)}
		}
	}
	return fmt.Errorf("the last activation, %s, does not fit the loss: end with softmax, sigmoid or no activation", a.Fn)
}

// inputLayer reads an InputLayer's shape.
func inputLayer(cfg map[string]any) (nn.Shape, error) {
	o := options{cfg: tokenInput(cfg), used: map[string]bool{}}
	var s nn.Shape
	var err error
	found := false
	for _, key := range []string{"batch_shape", "batch_input_shape"} {
		if v, ok := o.take(key); ok && v != nil {
			if s, err = shape(v, true); err != nil {
				return s, fmt.Errorf("%s: %w", key, err)
			}
			found = true
		}
	}
	if v, ok := o.take("input_shape"); ok && v != nil && !found { // tfjs-layers' InputLayerConfig
		if s, err = shape(v, false); err != nil {
			return s, fmt.Errorf("input_shape: %w", err)
		}
		found = true
	}
	if !found {
		return s, errors.New("no batch_shape or batch_input_shape")
	}
	if err := o.common(); err != nil {
		return s, err
	}
	if err := o.flag("sparse", "a sparse input"); err != nil {
		return s, err
	}
	if err := o.flag("ragged", "a ragged input"); err != nil {
		return s, err
	}
	if err := o.flag("optional", "an optional input"); err != nil {
		return s, err
	}
	return s, o.rest()
}

// shape reads a shape list, without its batch dimension when batch is
// set: [28, 28, 1] an image, [28, 28] one of one channel, [784] a
// vector. Every other size must be given.
func shape(v any, batch bool) (nn.Shape, error) {
	list, err := listOf(v)
	if err != nil {
		return nn.Shape{}, err
	}
	if batch {
		if len(list) == 0 {
			return nn.Shape{}, errors.New("[]: no batch dimension")
		}
		list = list[1:]
	}
	dims := make([]int, len(list))
	for i, d := range list {
		n, err := intOf(d)
		if err != nil || n < 1 {
			return nn.Shape{}, fmt.Errorf("%s: size %d is %s: meshtrain needs every size but the batch's", show(v), i, show(d))
		}
		dims[i] = n
	}
	switch len(dims) {
	case 1:
		return nn.Shape{C: dims[0]}, nil
	case 2:
		return nn.Shape{H: dims[0], W: dims[1], C: 1}, nil
	case 3:
		return nn.Shape{H: dims[0], W: dims[1], C: dims[2]}, nil
	}
	return nn.Shape{}, fmt.Errorf("%s: %d dimensions: meshtrain reads vectors and H×W×C images", show(v), len(dims))
}

// listOf reads a JSON list, also in the wrapped forms Keras's SavedModel
// metadata spells tuples and shapes in ({"class_name": "__tuple__" or
// "TensorShape", "items": […]}).
func listOf(v any) ([]any, error) {
	switch v := v.(type) {
	case []any:
		return v, nil
	case map[string]any:
		if c, _ := v["class_name"].(string); c == "__tuple__" || c == "TensorShape" {
			if items, ok := v["items"].([]any); ok {
				return items, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: want a list", show(v))
}

// intOf reads an integer.
func intOf(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: want an integer", show(v))
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
			return 0, fmt.Errorf("%s: want an integer", n)
		}
		i = int64(f)
	}
	return int(i), nil
}

// floatOf reads a finite number.
func floatOf(v any) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: want a number", show(v))
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s: want a finite number", n)
	}
	return f, nil
}

// show is a JSON value as the file spells it, cut short.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "…"
	}
	return string(b)
}

// options reads a layer's config, remembering which keys were read so
// that rest can refuse the others.
type options struct {
	cfg    map[string]any
	used   map[string]bool
	keras3 bool // the file is Keras 3's (see Model.keras3)
}

func (o *options) take(key string) (any, bool) {
	v, ok := o.cfg[key]
	o.used[key] = true
	return v, ok
}

// flag refuses a boolean option that is set.
func (o *options) flag(key, what string) error {
	v, _ := o.take(key)
	if b, ok := v.(bool); v == nil || (ok && !b) {
		return nil
	}
	return fmt.Errorf("%s = %s (%s) is not supported", key, show(v), what)
}

// null refuses an option that is set (a regularizer, a constraint).
func (o *options) null(key, why string) error {
	v, _ := o.take(key)
	if v == nil {
		return nil
	}
	what := show(v)
	if obj, ok := v.(map[string]any); ok {
		if c, ok := obj["class_name"].(string); ok {
			what = c
			if cfg, ok := obj["config"].(map[string]any); ok && len(cfg) > 0 {
				what += " " + show(cfg)
			}
		}
	}
	return fmt.Errorf("%s %s is not supported: %s", key, what, why)
}

// common reads the keys every layer has: name, trainable (true), dtype
// (float32) and the first layer's input shape (read by build).
func (o *options) common() error {
	o.take("name")
	o.take("batch_input_shape")
	o.take("batch_shape")
	o.take("batch_size")
	if v, ok := o.take("trainable"); ok && v != nil && v != true {
		return fmt.Errorf("trainable = %s is not supported: meshtrain trains every layer", show(v))
	}
	v, _ := o.take("dtype")
	if dt := dtype(v); dt != "" && dt != "float32" {
		return fmt.Errorf("dtype %s is not supported: meshtrain computes in float32", dt)
	}
	return nil
}

// dtype is a dtype's or dtype policy's name ("" for null): "float32",
// or {"class_name": "DTypePolicy" (Keras 3), "Policy" (tf.keras mixed
// precision) …, "config": {"name": "float32"}}.
func dtype(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case map[string]any:
		if cfg, ok := v["config"].(map[string]any); ok {
			if n, ok := cfg["name"].(string); ok {
				return n
			}
		}
	}
	return show(v)
}

// rest refuses the options not read, unless off (null, false, 0, "",
// an empty list or object).
func (o *options) rest() error {
	var keys []string
	for k := range o.cfg {
		if !o.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := o.cfg[k].(type) {
		case nil:
			continue
		case bool:
			if !v {
				continue
			}
		case string:
			if v == "" {
				continue
			}
		case json.Number:
			if f, err := v.Float64(); err == nil && f == 0 {
				continue
			}
		case []any:
			if len(v) == 0 {
				continue
			}
		case map[string]any:
			if len(v) == 0 {
				continue
			}
		}
		return fmt.Errorf("option %s = %s is not supported (meshtrain reads only the options it knows, and the others at their off value)", k, show(o.cfg[k]))
	}
	return nil
}

// square reads an int or a list of equal ints (kernel_size, strides,
// pool_size); def is used for null.
func square(o *options, key string, def int) (int, error) {
	v, _ := o.take(key)
	if v == nil {
		return def, nil
	}
	if n, ok := v.(json.Number); ok {
		return intOf(n)
	}
	list, err := listOf(v)
	if err != nil {
		return 0, fmt.Errorf("%s %s: want an integer or a list of two", key, show(v))
	}
	if len(list) != 2 {
		return 0, fmt.Errorf("%s %s: want two sizes (height, width)", key, show(v))
	}
	a, err1 := intOf(list[0])
	b, err2 := intOf(list[1])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s %s: want integers", key, show(v))
	}
	if a != b {
		return 0, fmt.Errorf("%s %s is not supported: meshtrain's windows are square, with equal strides", key, show(v))
	}
	return a, nil
}

// padding reads "valid" or "same" (null: valid).
func padding(o *options) (nn.Padding, error) {
	v, _ := o.take("padding")
	if v == nil {
		return nn.Valid, nil
	}
	s, _ := v.(string)
	switch strings.ToLower(s) {
	case "valid":
		return nn.Valid, nil
	case "same":
		return nn.Same, nil
	}
	return 0, fmt.Errorf("padding %s is not supported: meshtrain has valid and same", show(v))
}

// channelsLast refuses data_format channels_first.
func channelsLast(o *options) error {
	v, _ := o.take("data_format")
	if v == nil || v == "channels_last" {
		return nil
	}
	return fmt.Errorf("data_format %s is not supported: meshtrain reads images channels last (H×W×C), Keras's default", show(v))
}

// describe names a layer as errors do.
func (l Layer) describe() string { return fmt.Sprintf("layer %d %q (%s)", l.Index, l.Name, l.Class) }

// CheckData reports whether the model takes the examples of a data set
// of spec's Rows×Cols×C images in spec.Classes classes: an input of
// Rows×Cols×C (or Rows×Cols for C 1), or a vector of Rows·Cols·C (the image
// flattened, row by row), and as many class scores (one output and a
// sigmoid for two classes). The error names the layers that say
// otherwise.
func (m *Model) CheckData(spec nn.Spec) error {
	in := m.Arch.Input
	image := nn.Shape{H: spec.Rows, W: spec.Cols, C: spec.C()}
	if in != image && in != (nn.Shape{C: image.Size()}) {
		from := "its first layer's batch_input_shape"
		if len(m.Layers) > 0 && m.Layers[0].Class == "InputLayer" {
			from = m.Layers[0].describe()
		}
		return fmt.Errorf("the model takes inputs of %v (%s); the data set's are %d×%d×%d (%v, or %d flattened): give the model the data's input shape",
			in, from, spec.Rows, spec.Cols, spec.C(), image, image.Size())
	}
	if m.Classes != spec.Classes {
		last := m.Layers[len(m.Layers)-1].describe()
		if m.Classes == 2 && spec.Classes != 2 {
			return fmt.Errorf("the model ends in one output and a sigmoid (%s), a binary classifier; the data set has %d classes: end with a Dense of %d units and softmax", last, spec.Classes, spec.Classes)
		}
		return fmt.Errorf("the model scores %d classes (%s); the data set has %d: end with a Dense of %d units", m.Classes, last, spec.Classes, spec.Classes)
	}
	return nil
}

// NewModel builds the model for a data set of spec's shape (CheckData),
// seeded and with shards batch parts as nn.NewSequential (an nn.Graph
// for a Functional model that is not a chain): mirrored's Job.NewModel.
func (m *Model) NewModel(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
	if err := m.CheckData(spec); err != nil {
		return nil, err
	}
	return m.Arch.Build(seed, shards)
}

// Table lists the file's layers and the nn layers each became, which
// are the modules of the torch.nn.Sequential built from the same layers
// and the prefixes of their tensors in meshtrain's checkpoints.
func (m *Model) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "#\tKeras layer\tnn layers")
	for _, l := range m.Layers {
		var parts []string
		for i := l.First; i < l.End; i++ {
			parts = append(parts, fmt.Sprintf("%d %s", i, strings.TrimPrefix(nn.Kind(m.Arch.Layers[i]), "activation ")))
		}
		if l.Class == "InputLayer" {
			parts = append(parts, fmt.Sprintf("(input %v)", m.Arch.Input))
		}
		fmt.Fprintf(w, "%d\t%s %q\t%s\n", l.Index, l.Class, l.Name, strings.Join(parts, ", "))
	}
	w.Flush()
	var out strings.Builder
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		out.WriteString(strings.TrimRight(line, " \n"))
		if line != "" {
			out.WriteByte('\n')
		}
	}
	return out.String()
}
