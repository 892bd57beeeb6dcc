package kerasio

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// TestParseManifest: what a manifest may say, and what is refused before
// any weight file is opened.
func TestParseManifest(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       string // an error's text, or "" for none
		groups     int
	}{
		{"none", `{"modelTopology": {}}`, "", 0},
		{"null", `{"weightsManifest": null}`, "", 0},
		{"float32", `{"weightsManifest": [{"paths": ["a.bin", "b.bin"], "weights": [{"name": "d/kernel", "shape": [3, 2], "dtype": "float32"}]}]}`, "", 1},
		{"quantized", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [3], "dtype": "float32", "quantization": {"dtype": "uint8", "scale": 0.1, "min": -1}}]}]}`, "", 1},
		{"optimizer", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "m", "shape": [], "dtype": "float32", "group": "optimizer"}]}]}`, "", 1},
		{"int32", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [3], "dtype": "int32"}]}]}`, `weight d/kernel: dtype "int32"`, 0},
		{"uint4", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [3], "dtype": "float32", "quantization": {"dtype": "uint4"}}]}]}`, `quantization dtype "uint4"`, 0},
		{"no scale", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [3], "dtype": "float32", "quantization": {"dtype": "uint8"}}]}]}`, "uint8 quantization without scale and min", 0},
		{"negative", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [-3], "dtype": "float32"}]}]}`, "weight d/kernel: shape [-3]", 0},
		{"huge", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [65536, 65536, 65536], "dtype": "float32"}]}]}`, "weight d/kernel: shape [65536 65536 65536]", 0},
		{"too many bytes", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "a", "shape": [268435456], "dtype": "float32"}, {"name": "b", "shape": [1], "dtype": "float32"}]}]}`, "more than 1073741824 bytes of weights by b", 0},
		{"escaping path", `{"weightsManifest": [{"paths": ["../secret.bin"], "weights": []}]}`, `path "../secret.bin": want a file beside model.json`, 0},
		{"absolute path", `{"weightsManifest": [{"paths": ["/etc/passwd"], "weights": []}]}`, "want a file beside model.json", 0},
		{"url", `{"weightsManifest": [{"paths": ["http://x/a.bin"], "weights": []}]}`, "want a file beside model.json", 0},
		{"no paths", `{"weightsManifest": [{"paths": [], "weights": [{"name": "a", "shape": [1], "dtype": "float32"}]}]}`, "weights but no paths", 0},
		{"unknown field", `{"weightsManifest": [{"paths": ["a.bin"], "weights": [], "extra": 1}]}`, `unknown field "extra"`, 0},
		{"not a list", `{"weightsManifest": {"paths": ["a.bin"]}}`, "weightsManifest", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseManifest([]byte(tc.json))
			if tc.want == "" {
				if err != nil || len(g) != tc.groups {
					t.Errorf("%d groups, %v; want %d and no error", len(g), err, tc.groups)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestDecode: float32, uint8 and uint16 quantized (q·scale + min) and
// float16 values, by hand.
func TestDecode(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	le16 := func(v ...uint16) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		q    *quantization
		raw  []byte
		want []float32
	}{
		{"float32", nil, binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5)), math.Float32bits(-2)), []float32{1.5, -2}},
		{"uint8", &quantization{Dtype: "uint8", Scale: f(0.5), Min: f(-1)}, []byte{0, 3}, []float32{-1, 0.5}},
		{"uint16", &quantization{Dtype: "uint16", Scale: f(0.25), Min: f(1)}, le16(0, 400), []float32{1, 101}},
		// 0x3c00 1, 0xc000 −2, 0x3555 0.33325195, 0x0001 2⁻²⁴, 0x7c00 +Inf, 0x8000 −0.
		{"float16", &quantization{Dtype: "float16"}, le16(0x3c00, 0xc000, 0x3555, 0x0001, 0x7c00, 0x8000),
			[]float32{1, -2, 0.33325195, 1.0 / (1 << 24), float32(math.Inf(1)), float32(math.Copysign(0, -1))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := manifestEntry{Name: "w", Shape: []int{len(tc.want)}, Dtype: "float32", Quantization: tc.q}
			n, size, err := e.size()
			if err != nil || n != len(tc.want) || size != len(tc.raw) {
				t.Fatalf("size: %d values, %d bytes, %v; want %d, %d", n, size, err, len(tc.want), len(tc.raw))
			}
			got := make([]float32, n)
			e.decode(tc.raw, got)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(tc.want[i]) {
					t.Errorf("value %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestReadTFJSSplitAcrossFiles: a group's weights run on across its
// files (a weight may straddle two), as tfjs's weights_loader reads
// them; written by WriteTFJS, split in three, read back (through
// nn/keras's reading of the topology WriteTFJS wrote, a Sequential or a
// Model) equal.
func TestReadTFJSSplitAcrossFiles(t *testing.T) {
	for name, a := range archs {
		t.Run(name, func(t *testing.T) { splitAcrossFiles(t, a) })
	}
}

func splitAcrossFiles(t *testing.T, a nn.Architecture) {
	m := randomModel(t, a, 11)
	dir := t.TempDir()
	if err := WriteTFJS(dir, a, m); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, weightsFile))
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{0, len(data)/3 + 1, 2*len(data)/3 + 2, len(data)} // not on a float's boundary
	var names []string
	for i := range 3 {
		name := []string{"p1.bin", "p2.bin", "p3.bin"}[i]
		names = append(names, `"`+name+`"`)
		if err := os.WriteFile(filepath.Join(dir, name), data[cuts[i]:cuts[i+1]], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, ModelJSON))
	if err != nil {
		t.Fatal(err)
	}
	js = []byte(strings.Replace(string(js), `"`+weightsFile+`"`, strings.Join(names, ", "), 1))
	path := filepath.Join(dir, ModelJSON)
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	km, err := keras.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ReadTFJSWeights(path, km)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := km.Arch.Build(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(km.Arch, fresh, w); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(state(fresh), state(m)) {
		t.Error("weights read back from three files differ from those written")
	}
}

// FuzzParseManifest: any model.json either parses to a manifest whose
// every weight has a size within the bound, or is refused; nothing
// panics or asks for more than maxWeightBytes.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [3, 2], "dtype": "float32"}]}]}`))
	f.Add([]byte(`{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "d/kernel", "shape": [3], "dtype": "float32", "quantization": {"dtype": "uint16", "scale": 1, "min": 0}}]}]}`))
	f.Add([]byte(`{"weightsManifest": [{"paths": ["a.bin"], "weights": [{"name": "x", "shape": [], "dtype": "float32", "quantization": {"dtype": "float16"}}]}]}`))
	f.Add([]byte(`{"weightsManifest": null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		groups, err := parseManifest(b)
		if err != nil {
			return
		}
		total := 0
		for _, g := range groups {
			for _, p := range g.Paths {
				if !filepath.IsLocal(p) {
					t.Fatalf("path %q accepted", p)
				}
			}
			for _, e := range g.Weights {
				n, size, err := e.size()
				if err != nil || n < 0 || size < n {
					t.Fatalf("weight %+v accepted: %d values, %d bytes, %v", e, n, size, err)
				}
				total += size
			}
		}
		if total > maxWeightBytes {
			t.Fatalf("%d bytes accepted", total)
		}
	})
}
