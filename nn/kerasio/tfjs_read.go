package kerasio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// manifestGroup is one group of model.json's weightsManifest: weights
// stored one after the other across its paths, concatenated in order
// (tfjs-core's io/types.ts WeightsManifestGroupConfig, and
// weights_loader.ts, which reads them so).
type manifestGroup struct {
	Paths   []string        `json:"paths"`
	Weights []manifestEntry `json:"weights"`
}

// manifestEntry is one weight (WeightsManifestEntry): its name
// ("conv2d/kernel"), shape and dtype, and how it is quantized if it is.
type manifestEntry struct {
	Name         string        `json:"name"`
	Shape        []int         `json:"shape"`
	Dtype        string        `json:"dtype"`
	Group        string        `json:"group,omitempty"`
	Quantization *quantization `json:"quantization,omitempty"`
}

// quantization is a quantized weight's: stored as uint8 or uint16, the
// value q·Scale + Min, or as float16.
type quantization struct {
	Dtype string   `json:"dtype"`
	Scale *float64 `json:"scale,omitempty"`
	Min   *float64 `json:"min,omitempty"`
}

// maxWeightBytes bounds what a manifest may ask to be read: nn's largest
// model in float32.
const maxWeightBytes = 4 * nn.MaxParams

// size is the entry's values and stored bytes, or an error naming it.
func (e manifestEntry) size() (n, bytes int, err error) {
	n = 1
	for _, d := range e.Shape {
		if d < 0 || d > nn.MaxParams || n*d > nn.MaxParams {
			return 0, 0, fmt.Errorf("weight %s: shape %v: want sizes ≥ 0 and at most %d values", e.Name, e.Shape, nn.MaxParams)
		}
		n *= d
	}
	per := 4
	switch {
	case e.Dtype != "float32":
		return 0, 0, fmt.Errorf("weight %s: dtype %q: meshtrain reads float32 weights (and their uint8, uint16 or float16 quantizations)", e.Name, e.Dtype)
	case e.Quantization == nil:
	case e.Quantization.Dtype == "uint8":
		per = 1
	case e.Quantization.Dtype == "uint16" || e.Quantization.Dtype == "float16":
		per = 2
	default:
		return 0, 0, fmt.Errorf("weight %s: quantization dtype %q: want uint8, uint16 or float16", e.Name, e.Quantization.Dtype)
	}
	if q := e.Quantization; q != nil && q.Dtype != "float16" && (q.Scale == nil || q.Min == nil) {
		return 0, 0, fmt.Errorf("weight %s: %s quantization without scale and min", e.Name, q.Dtype)
	}
	return n, n * per, nil
}

// decode reads the entry's values from b (of its stored bytes).
func (e manifestEntry) decode(b []byte, out []float32) {
	q := e.Quantization
	for i := range out {
		switch {
		case q == nil:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case q.Dtype == "uint8":
			out[i] = float32(float64(b[i])**q.Scale + *q.Min)
		case q.Dtype == "uint16":
			out[i] = float32(float64(binary.LittleEndian.Uint16(b[2*i:]))**q.Scale + *q.Min)
		default:
			out[i] = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
}

// halfToFloat is an IEEE 754 half-precision value as a float32.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp, frac := uint32(h>>10)&0x1f, uint32(h)&0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac·2⁻²⁴
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// parseManifest reads model.json's weightsManifest (nil when it has
// none) and checks it: each weight's dtype and size, each path a file
// beside model.json, the bytes in all at most maxWeightBytes.
func parseManifest(b []byte) ([]manifestGroup, error) {
	var top struct {
		Manifest json.RawMessage `json:"weightsManifest"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a model.json: %w", err)
	}
	if len(top.Manifest) == 0 || string(top.Manifest) == "null" {
		return nil, nil
	}
	var groups []manifestGroup
	d := json.NewDecoder(bytes.NewReader(top.Manifest))
	d.DisallowUnknownFields()
	if err := d.Decode(&groups); err != nil {
		return nil, fmt.Errorf("weightsManifest: %w", err)
	}
	total := 0
	for gi, g := range groups {
		if len(g.Paths) == 0 && len(g.Weights) > 0 {
			return nil, fmt.Errorf("weightsManifest group %d: weights but no paths", gi)
		}
		for _, p := range g.Paths {
			if !filepath.IsLocal(p) || strings.Contains(p, "://") {
				return nil, fmt.Errorf("weightsManifest group %d: path %q: want a file beside model.json", gi, p)
			}
		}
		for _, e := range g.Weights {
			_, n, err := e.size()
			if err != nil {
				return nil, fmt.Errorf("weightsManifest: %w", err)
			}
			if total += n; total > maxWeightBytes {
				return nil, fmt.Errorf("weightsManifest: more than %d bytes of weights by %s: more than meshtrain's largest model", maxWeightBytes, e.Name)
			}
		}
	}
	return groups, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, keras.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > keras.MaxFileSize {
		return nil, fmt.Errorf("%s: more than %d bytes: not a model.json", path, keras.MaxFileSize)
	}
	return b, nil
}

// ReadTFJSWeights reads the weights the weightsManifest of the model.json
// at path lists, from the files beside it, as the weights of the nn
// layers of km (read from the same file), for Import into a model built
// from km.Arch. Every weight is matched to the model's by name and shape
// before any file is opened, and each file's size is checked against the
// manifest before it is read, so what is read is bounded by the model. A weight of no layer of the model, a model weight
// the manifest lacks, a shape other than the model's, a file short or
// long: each is an error naming the weight and the file. It returns nil
// weights when the file has no manifest.
func ReadTFJSWeights(path string, km *keras.Model) ([][]Weight, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	groups, err := parseManifest(b)
	if err != nil || groups == nil {
		if err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	m, err := km.Arch.Build(0, 1)
	if err != nil {
		return nil, err
	}
	want, err := Expect(km.Arch, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Every weight is matched to the model's, by name and shape, before
	// any file is opened: the bytes then read are at most the model's
	// (and, for an optimizer's state the manifest may carry, twice that,
	// Adam's two moments).
	type slot struct{ layer, weight int }
	slots := make([][]slot, len(groups)) // by group and entry; layer −1: skipped
	taken := map[slot]string{}           // the manifest's name of each
	modelBytes, optBytes := 0, 0
	for _, ws := range want {
		for _, w := range ws {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			modelBytes += 4 * n
		}
	}
	dir := filepath.Dir(path)
	for gi, g := range groups {
		for _, e := range g.Weights {
			where := ""
			if len(g.Paths) > 0 {
				where = " in " + filepath.Join(dir, g.Paths[0])
			}
			if e.Group == "optimizer" {
				_, size, _ := e.size()
				if optBytes += size; optBytes > 2*modelBytes {
					return nil, fmt.Errorf("%s: weight %s%s: the optimizer's weights take more than twice the model's %d bytes", path, e.Name, where, modelBytes)
				}
				slots[gi] = append(slots[gi], slot{-1, -1})
				continue
			}
			li, wi, err := locate(km, want, e.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: weight %s%s: %w", path, e.Name, where, err)
			}
			s := slot{li, wi}
			if prev, dup := taken[s]; dup {
				return nil, fmt.Errorf("%s: weight %s%s: the same weight of the model as %s", path, e.Name, where, prev)
			}
			taken[s] = e.Name
			if w := want[li][wi]; !equalShape(e.Shape, w.Shape) {
				return nil, fmt.Errorf("%s: weight %s%s: shape %v, the model's is %v", path, e.Name, where, e.Shape, w.Shape)
			}
			slots[gi] = append(slots[gi], s)
		}
	}
	for li, ws := range want {
		for wi, w := range ws {
			if _, ok := taken[slot{li, wi}]; !ok {
				l := kerasLayerOf(km, li)
				return nil, fmt.Errorf("%s: the model's weight %s/%s (%s, shape %v) is not in the weightsManifest", path, l.Name, w.Name, describe(l), w.Shape)
			}
		}
	}
	got := make([][]Weight, len(want))
	for gi, g := range groups {
		if len(g.Paths) == 0 {
			continue // no weights (parseManifest)
		}
		data, err := readGroup(dir, g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		off := 0
		for ei, e := range g.Weights {
			n, size, _ := e.size()
			raw := data[off : off+size]
			off += size
			s := slots[gi][ei]
			if s.layer < 0 {
				continue
			}
			w := want[s.layer][s.weight]
			vals := make([]float32, n)
			e.decode(raw, vals)
			got[s.layer] = append(got[s.layer], Weight{Name: w.Name, Shape: w.Shape, Data: vals})
		}
	}
	return got, nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func describe(l keras.Layer) string { return fmt.Sprintf("layer %d %q, %s", l.Index, l.Name, l.Class) }

// kerasLayerOf is the file's layer nn layer i came from.
func kerasLayerOf(km *keras.Model, i int) keras.Layer {
	for _, l := range km.Layers {
		if i >= l.First && i < l.End {
			return l
		}
	}
	return keras.Layer{Index: -1, Name: fmt.Sprint(i), Class: "?"}
}

// aliases are Keras weights named after the Keras layer rather than the
// nn layer that holds them: SeparableConv2D's pointwise_kernel is the
// kernel of the 1×1 Conv2D after its depthwise convolution (nn/keras).
var aliases = map[string]string{"pointwise_kernel": "kernel"}

// locate finds the weight a manifest name ("conv2d/kernel", or with
// scopes before: "sequential/conv2d/kernel") stands for: the nn layer of
// the file's layer of that name that has the weight.
func locate(km *keras.Model, want [][]Weight, name string) (layer, weight int, err error) {
	cut := strings.LastIndexByte(name, '/')
	if cut < 0 {
		return 0, 0, errors.New(`not "layer/weight"`)
	}
	scope, wname := name[:cut], strings.TrimSuffix(name[cut+1:], ":0")
	for _, l := range km.Layers {
		if scope != l.Name && !strings.HasSuffix(scope, "/"+l.Name) {
			continue
		}
		for _, name := range []string{wname, aliases[wname]} {
			for i := l.First; i < l.End; i++ {
				for j, w := range want[i] {
					if w.Name == name {
						return i, j, nil
					}
				}
			}
		}
		return 0, 0, fmt.Errorf("the model's %s has no weight %s", describe(l), wname)
	}
	return 0, 0, fmt.Errorf("the model has no layer %q", scope)
}

// readGroup reads a group's files, concatenated, after checking that
// their sizes add up to exactly the bytes its weights take.
func readGroup(dir string, g manifestGroup) ([]byte, error) {
	need := 0
	for _, e := range g.Weights {
		_, n, _ := e.size()
		need += n
	}
	files := make([]io.ReadCloser, 0, len(g.Paths))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	have := 0
	for _, p := range g.Paths {
		f, err := inputfile.Open(filepath.Join(dir, p))
		if err != nil {
			first := "no weights"
			if len(g.Weights) > 0 {
				first = "weights " + g.Weights[0].Name + " on"
			}
			return nil, fmt.Errorf("weight file %s (of the manifest's group of %s): %w", p, first, err)
		}
		files = append(files, f)
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		have += int(min(st.Size(), maxWeightBytes+1))
	}
	name := filepath.Join(dir, g.Paths[0])
	if len(g.Paths) > 1 {
		name = fmt.Sprintf("%s … %s", name, g.Paths[len(g.Paths)-1])
	}
	if have != need {
		off, cut := 0, ""
		for _, e := range g.Weights {
			_, n, _ := e.size()
			if off+n > have {
				cut = fmt.Sprintf(": weight %s (bytes %d to %d) is past the end", e.Name, off, off+n)
				break
			}
			off += n
		}
		if have < need {
			return nil, fmt.Errorf("weight file %s: %d bytes, the weightsManifest's weights take %d%s (a short or truncated file)", name, have, need, cut)
		}
		return nil, fmt.Errorf("weight file %s: %d bytes, %d more than the weightsManifest's weights take (after the last, %s): not this model's weights", name, have, have-need, g.Weights[len(g.Weights)-1].Name)
	}
	data := make([]byte, need)
	rs := make([]io.Reader, len(files))
	for i, f := range files {
		rs[i] = f
	}
	if _, err := io.ReadFull(io.MultiReader(rs...), data); err != nil {
		return nil, fmt.Errorf("weight file %s: %w (did it change while read?)", name, err)
	}
	return data, nil
}
