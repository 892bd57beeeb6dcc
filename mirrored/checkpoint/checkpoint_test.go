package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
)

func testCheckpoint() *Checkpoint {
	return &Checkpoint{
		Model: "softmax", Params: []float32{1, -2.5, 3e-9, 0}, OptState: []float32{0.5, 0.25, -1, 7},
		Layout: Layout{
			Params:  []Slot{{"weight", []int{1, 3}}, {"bias", []int{1}}},
			State:   []Slot{{"optimizer.weight.momentum_buffer", []int{1, 3}}, {"optimizer.bias.momentum_buffer", []int{1}}},
			Classes: 1, Rows: 1, Cols: 3,
			Architecture: `{"format":"meshtrain-sequential/1","input":[1,3,1],"layers":[{"type":"flatten"},{"type":"dense","units":1,"init":"glorot"}]}`,
			InputScale:   255, InputMean: 0.1307, InputStd: 0.3081,
		},
		Step: 1875, Epoch: 3, StepInEpoch: 12, StepsPerEpoch: 937, Seed: -42,
		Fingerprint: "abc123", Config: `{"model":"softmax"}`, History: `[]`,
		SavedAt: time.Date(2026, 11, 22, 5, 0, 0, 123, time.UTC),
		Version: "v0.9.0 (rev f041fb3bed36)",
	}
}

// flatMeta is testCheckpoint's metadata as a format 2 file had it.
func flatMeta() map[string]string {
	m := testCheckpoint().metadata()
	m["format"] = FormatV2
	for _, k := range []string{"classes", "image_size", "meshtrain_version", "input_mean", "input_std", "architecture"} {
		delete(m, k)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	flat := &Checkpoint{Model: "lenet", Params: []float32{1}, Seed: 1}
	unscaled := testCheckpoint() // float images used as stored: x, not x/255
	unscaled.InputScale, unscaled.InputMean, unscaled.InputStd = 1, 0, 1
	for _, c := range []*Checkpoint{testCheckpoint(), flat, unscaled} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if n := binary.LittleEndian.Uint64(b); (8+n)%8 != 0 {
			t.Errorf("header of %d bytes: data section not 8-byte aligned", n)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if c.SavedAt.IsZero() {
			got.SavedAt = time.Time{}
		}
		if c == flat { // no layout: one vector, named "params"
			c.Layout.Params = []Slot{{paramsTensor, []int{1}}}
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, c)
		}
	}
}

// TestSafetensorsLayout checks the bytes against the format by hand: the
// header JSON a Python reader expects and the little-endian data.
func TestSafetensorsLayout(t *testing.T) {
	b, err := EncodeSafetensors(map[string]Tensor{
		"b": {DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 0x80, 0x3f}},
		"a": {DType: "U8", Shape: []int{2, 1}, Data: []byte{7, 9}},
	}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	hdr := strings.TrimRight(string(b[8:8+n]), " ")
	want := `{"__metadata__":{"k":"v"},"a":{"dtype":"U8","shape":[2,1],"data_offsets":[0,2]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`
	if hdr != want {
		t.Errorf("header\n got %s\nwant %s", hdr, want)
	}
	if data := b[8+n:]; string(data) != "\x07\x09\x00\x00\x80\x3f" {
		t.Errorf("data %x", data)
	}
}

// rawFile builds a safetensors file from a literal header and data.
func rawFile(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	return append(append(b, header...), data...)
}

func TestDecodeSafetensorsErrors(t *testing.T) {
	f32 := make([]byte, 8)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "3 bytes: too short"},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), "header length 4611686018427387904 exceeds the 104857600-byte limit"},
		{"header past the end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "header length 100 runs past the end of the 10-byte file"},
		{"not json object", rawFile(`[1]`, nil), "header does not start with '{'"},
		{"bad json", rawFile(`{"a":`, nil), "header JSON: unexpected end of JSON input"},
		{"metadata not strings", rawFile(`{"__metadata__":{"k":1}}`, nil), "__metadata__ must map strings to strings"},
		{"unknown field", rawFile(`{"p":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, f32), `tensor "p": header entry: json: unknown field "x"`},
		{"unknown dtype", rawFile(`{"p":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, f32), `tensor "p": unknown dtype "F31"`},
		{"shape mismatch", rawFile(`{"p":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32), `tensor "p": shape [3] of F32 is 12 bytes but the data are 8 bytes`},
		{"negative dim", rawFile(`{"p":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32), `negative dimension`},
		{"overflowing shape", rawFile(`{"p":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, f32), `overflows`},
		{"offsets past data", rawFile(`{"p":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, f32), `data_offsets [0 16]: want [begin, end] with 0 ≤ begin ≤ end ≤ 8`},
		{"offsets reversed", rawFile(`{"p":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, f32), `data_offsets [8 0]`},
		{"one offset", rawFile(`{"p":{"dtype":"F32","shape":[0],"data_offsets":[0]}}`, f32), `data_offsets [0]`},
		{"gap", rawFile(`{"p":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32), `tensor "p" starts at byte 4 of the data section but the previous tensor ends at 0`},
		{"overlap", rawFile(`{"p":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"q":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32), `tensor "q" starts at byte 4`},
		{"trailing", rawFile(`{"p":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32), `tensors cover 4 bytes but the data section has 8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeSafetensors(tt.file)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := flatMeta()
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	p := F32Tensor([]float32{1, 2})
	v3 := func(params, state []string) map[string]string {
		m := testCheckpoint().metadata()
		for k, names := range map[string][]string{paramOrderKey: params, stateOrderKey: state} {
			if names != nil {
				b, _ := json.Marshal(names)
				m[k] = string(b)
			}
		}
		return m
	}
	withV3 := func(k, v string) map[string]string {
		m := v3([]string{"weight"}, []string{})
		m[k] = v
		return m
	}
	tests := []struct {
		name    string
		tensors map[string]Tensor
		meta    map[string]string
		want    string
	}{
		{"not meshtrain", map[string]Tensor{"params": p}, map[string]string{"k": "v"}, `metadata format "": want "meshtrain-checkpoint/3"`},
		{"no params", map[string]Tensor{"w": p}, good, `no "params" tensor`},
		{"params not f32", map[string]Tensor{"params": {DType: "F64", Shape: []int{1}, Data: make([]byte, 8)}}, good, `tensor "params": dtype F64: want F32`},
		{"params matrix", map[string]Tensor{"params": {DType: "F32", Shape: []int{1, 2}, Data: p.Data}}, good, `tensor "params" has shape [1 2]: want a vector`},
		{"extra tensor", map[string]Tensor{"params": p, "extra": p}, good, `unexpected tensor "extra"`},
		{"bad step", map[string]Tensor{"params": p}, with("step", "x"), `metadata "step" = "x": want an integer ≥ 0`},
		{"negative epoch", map[string]Tensor{"params": p}, with("epoch", "-1"), `metadata "epoch" = "-1"`},
		{"bad seed", map[string]Tensor{"params": p}, with("seed", ""), `metadata "seed" = ""`},
		{"position past epoch", map[string]Tensor{"params": p}, with("step_in_epoch", "937"), `step_in_epoch 937: want < steps_per_epoch 937`},
		{"bad time", map[string]Tensor{"params": p}, with("saved_at", "yesterday"), `metadata "saved_at" = "yesterday"`},
		{"v1 with a digest", map[string]Tensor{"params": p}, with("format", FormatV1), `version 1 files have none`},
		{"v3 without order", map[string]Tensor{"weight": p}, v3(nil, nil), `metadata "param_order" = "": want a JSON array`},
		{"v3 order names a missing tensor", map[string]Tensor{"weight": p}, v3([]string{"bias"}, nil), `lists tensor "bias", which is missing`},
		{"v3 tensor listed twice", map[string]Tensor{"weight": p}, v3([]string{"weight"}, []string{"weight"}), `lists tensor "weight", which is missing or listed twice`},
		{"v3 unlisted tensor", map[string]Tensor{"weight": p, "extra": p}, v3([]string{"weight"}, []string{}), `unexpected tensor "extra"`},
		{"v3 no parameters", map[string]Tensor{"weight": p}, v3([]string{}, []string{"weight"}), `names no parameter tensor`},
		{"v3 not f32", map[string]Tensor{"weight": {DType: "F64", Shape: []int{1}, Data: make([]byte, 8)}}, v3([]string{"weight"}, []string{}), `tensor "weight": dtype F64: want F32`},
		{"v3 bad classes", map[string]Tensor{"weight": p}, withV3("classes", "ten"), `metadata "classes" = "ten"`},
		{"v3 bad image size", map[string]Tensor{"weight": p}, withV3("image_size", "28"), `metadata "image_size" = "28"`},
		{"v3 bad input scale", map[string]Tensor{"weight": p}, withV3("input_scale", "0"), `metadata "input_scale" = "0": want a number > 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(sealed(t, tt.tensors, tt.meta))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrDamaged) {
				t.Errorf("got %v, want an ErrDamaged containing %q", err, tt.want)
			}
		})
	}
}

// sealed encodes tensors and meta with a valid digest, so that Decode's
// later checks are reached.
func sealed(t *testing.T, tensors map[string]Tensor, meta map[string]string) []byte {
	t.Helper()
	m := maps.Clone(meta)
	m[digestKey] = Digest(tensors, m)
	b, err := EncodeSafetensors(tensors, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEveryBitFlipIsDamage flips each bit of a checkpoint file in turn:
// every one is reported as damage (ErrDamaged), none decodes.
func TestEveryBitFlipIsDamage(t *testing.T) {
	b, err := testCheckpoint().Encode()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 * len(b) {
		b[i/8] ^= 1 << (i % 8)
		c, err := Decode(b)
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("bit %d of byte %d (%q) flipped: got %+v, %v; want ErrDamaged", i%8, i/8, b[i/8], c, err)
		}
		b[i/8] ^= 1 << (i % 8)
	}
}

// TestFormatVersions: a FormatV2 file written by meshtrain before format
// 3 (testdata/v2.safetensors) loads, verified, as one flat vector; a
// FormatV1 file (no digest) still loads, marked Unverified; non-finite
// values are damage in every version and are never written; a newer format
// that is intact is not damage.
func TestFormatVersions(t *testing.T) {
	b2, err := os.ReadFile("testdata/v2.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Decode(b2)
	want := testCheckpoint()
	want.Layout = Layout{Params: []Slot{{paramsTensor, []int{4}}}, State: []Slot{{optimizerTensor, []int{4}}}}
	want.Version, want.InputMean, want.InputStd = "", 0, 0 // recorded since format 3
	if c2 != nil {
		c2.Layout = Layout{Params: []Slot{{paramsTensor, []int{len(c2.Params)}}}, State: []Slot{{optimizerTensor, []int{len(c2.OptState)}}}}
	}
	if err != nil || c2.Unverified || !reflect.DeepEqual(c2, want) {
		t.Errorf("the v2 file: %+v, %v; want %+v", c2, err, want)
	}
	v1 := flatMeta()
	v1["format"] = FormatV1
	delete(v1, digestKey)
	p := F32Tensor([]float32{1, 2})
	b, err := EncodeSafetensors(map[string]Tensor{paramsTensor: p}, v1)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Decode(b); err != nil || !c.Unverified {
		t.Errorf("a v1 file: %+v, %v; want it read, Unverified", c, err)
	}
	nan := F32Tensor([]float32{1, float32(math.NaN())})
	b, _ = EncodeSafetensors(map[string]Tensor{paramsTensor: nan}, v1)
	if _, err := Decode(b); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "params[1] is NaN") {
		t.Errorf("a v1 file holding NaN: %v", err)
	}
	if _, err := Decode(sealed(t, map[string]Tensor{paramsTensor: p, optimizerTensor: F32Tensor([]float32{float32(math.Inf(-1))})}, flatMeta())); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "optimizer_state[0] is -Inf") {
		t.Errorf("a sealed file holding -Inf: %v", err)
	}
	c := testCheckpoint()
	c.Params[3] = float32(math.Inf(1))
	if _, err := c.Encode(); err == nil || !strings.Contains(err.Error(), "bias[0] is +Inf") {
		t.Errorf("encoding +Inf: %v", err)
	}
	c.Params[3], c.OptState[2] = 0, float32(math.NaN())
	if _, err := c.Encode(); err == nil || !strings.Contains(err.Error(), "optimizer.weight.momentum_buffer[2] is NaN") {
		t.Errorf("encoding NaN: %v", err)
	}
	v4 := flatMeta()
	v4["format"] = "meshtrain-checkpoint/4"
	if _, err := Decode(sealed(t, map[string]Tensor{paramsTensor: p}, v4)); err == nil || errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "newer meshtrain") {
		t.Errorf("an intact newer format: %v", err)
	}
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, testCheckpoint(), 0); err != nil {
		t.Fatal(err)
	}
	keep := []string{FileName(1875), ".other.tmp-1", "ckpt-000000001.safetensors.tmp-2"}
	for _, name := range append(keep[1:], atomicfile.TempPrefix(FileName(2000))+"123") {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveTemps(dir)
	if err != nil || len(removed) != 1 || !strings.Contains(removed[0], ".ckpt-000002000.safetensors.tmp-123") {
		t.Fatalf("removed %q, %v", removed, err)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	slices.Sort(left)
	slices.Sort(keep)
	if !slices.Equal(left, keep) {
		t.Errorf("left %q, want %q", left, keep)
	}
}

func TestWriteKeepsLastK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	if latest, err := Latest(dir); err != nil || latest != "" {
		t.Fatalf("empty dir: %q, %v", latest, err)
	}
	c := testCheckpoint()
	for _, step := range []int{5, 100, 20, 1000000000} {
		c.Step = step
		if _, err := Write(dir, c, 2); err != nil {
			t.Fatal(err)
		}
	}
	all, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "ckpt-000000100.safetensors"), filepath.Join(dir, "ckpt-1000000000.safetensors")}
	if !reflect.DeepEqual(all, want) {
		t.Errorf("kept %q, want %q", all, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries (temporary files left behind?)", len(entries))
	}
	got, err := Read(want[1])
	if err != nil || got.Step != 1000000000 {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	// A corrupt file is reported with its name.
	bad := filepath.Join(dir, "ckpt-000000101.safetensors")
	if err := os.WriteFile(bad, []byte("garbage!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("corrupt file: %v", err)
	}
}

func FuzzDecodeSafetensors(f *testing.F) {
	b, _ := testCheckpoint().Encode()
	f.Add(b)
	f.Add(rawFile(`{"p":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, []byte{1, 2, 3, 4}))
	f.Add(rawFile(`{}`, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		tensors, meta, err := DecodeSafetensors(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		again, err := EncodeSafetensors(tensors, meta)
		if err != nil {
			t.Fatalf("re-encoding a decoded file: %v", err)
		}
		t2, m2, err := DecodeSafetensors(again)
		if err != nil {
			t.Fatalf("decoding a re-encoded file: %v", err)
		}
		if len(t2) != len(tensors) || len(m2) != len(meta) {
			t.Fatalf("re-encoding changed the contents")
		}
		for name, tt := range tensors {
			if !reflect.DeepEqual(tt.Shape, t2[name].Shape) || string(tt.Data) != string(t2[name].Data) {
				t.Fatalf("tensor %q changed", name)
			}
		}
		_, _ = Decode(b)
	})
}

// TestEncodeLayoutErrors: a layout that does not tile its vector, or
// names a tensor twice, is refused before anything is written.
func TestEncodeLayoutErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params []Slot
		state  []Slot
		want   string
	}{
		{"short", []Slot{{"weight", []int{1, 3}}}, nil, "parameter tensors cover 3 of the 4 values"},
		{"long", []Slot{{"weight", []int{1, 3}}, {"bias", []int{2}}}, nil, `parameter tensor "bias" [2] runs past the 4 values`},
		{"twice", []Slot{{"weight", []int{2}}, {"weight", []int{2}}}, nil, `parameter tensor name "weight" is empty or used twice`},
		{"state named as a parameter", []Slot{{"w", []int{4}}}, []Slot{{"w", []int{4}}}, `optimizer state tensor name "w"`},
	} {
		c := testCheckpoint()
		c.Layout.Params, c.Layout.State = tc.params, tc.state
		if _, err := c.Encode(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestInputScaleMetadata: the scale is written only when it is not 255,
// so a checkpoint of a set scaled as MNIST's has the metadata it had
// before the scale was recorded, and one without it reads as 255.
func TestInputScaleMetadata(t *testing.T) {
	cases := []struct {
		scale float64
		meta  string // "" for no input_scale
	}{{255, ""}, {1, "1"}, {65535, "65535"}}
	for _, c := range cases {
		ck := testCheckpoint()
		ck.InputScale = c.scale
		m := ck.metadata()
		if got, ok := m["input_scale"]; got != c.meta || ok != (c.meta != "") {
			t.Errorf("scale %v: metadata input_scale %q (present %t), want %q", c.scale, got, ok, c.meta)
		}
	}
}

// TestDataMetadata: channels, class names and a table's features round
// trip, are written only when set (a greyscale, numbered set's file is
// what it was before they existed), and a malformed value is an error
// naming its key.
func TestDataMetadata(t *testing.T) {
	ck := testCheckpoint()
	ck.Classes, ck.Channels, ck.ClassNames = 2, 3, []string{"cat", "dog"}
	ck.Features = `{"label":"y","columns":[{"name":"a","mean":1,"std":2}]}`
	b, err := ck.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Channels != 3 || !slices.Equal(got.ClassNames, ck.ClassNames) || got.Features != ck.Features {
		t.Errorf("round trip: channels %d, classes %v, features %q", got.Channels, got.ClassNames, got.Features)
	}
	plain := testCheckpoint().metadata()
	for _, k := range []string{"channels", "class_names", "input_features"} {
		if _, ok := plain[k]; ok {
			t.Errorf("metadata %q written for a greyscale set without names", k)
		}
	}
	for _, c := range []struct{ key, value, want string }{
		{"channels", "1", `metadata "channels" = "1": want an integer ≥ 2`},
		{"channels", "three", `metadata "channels"`},
		{"class_names", `["a", "b"]`, `metadata "class_names"`}, // testCheckpoint has 1 class
		{"class_names", `not json`, `want a JSON array of 1 strings`},
	} {
		m := testCheckpoint().metadata()
		m[c.key] = c.value
		err := (&Checkpoint{}).readMeta(m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %q: %v, want an error containing %q", c.key, c.value, err, c.want)
		}
	}
}
