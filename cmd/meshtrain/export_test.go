package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"codeberg.org/sbinet/npyio/npy"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/nodetest"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// bandCNN is a Keras model for bandSet's 8×8 images in 3 classes: a
// convolution of 4 channels, so that its Flatten is one Keras orders
// otherwise than nn.
const bandCNN = `{"class_name": "Sequential", "config": {"name": "band", "layers": [
 {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8, 8, 1], "dtype": "float32", "name": "in"}},
 {"class_name": "Conv2D", "config": {"name": "conv2d", "filters": 4, "kernel_size": [3, 3], "padding": "same", "activation": "relu"}},
 {"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": [2, 2]}},
 {"class_name": "Flatten", "config": {"name": "flatten"}},
 {"class_name": "Dense", "config": {"name": "dense", "units": 3, "activation": "softmax"}}]}}`

// readNpy reads eval --predictions' file with npyio: its shape and data.
func readNpy(t *testing.T, path string) ([]int, []float32) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := npy.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var v []float32
	if err := r.Read(&v); err != nil {
		t.Fatal(err)
	}
	if strings.Trim(r.Header.Descr.Type, "'") != "<f4" || r.Header.Descr.Fortran { // npyio keeps the quotes
		t.Errorf("dtype %q, fortran %v: want <f4 in C order", r.Header.Descr.Type, r.Header.Descr.Fortran)
	}
	return r.Header.Descr.Shape, v
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if err := newApp().Run(append([]string{"meshtrain", "--log-level", "error"}, args...)); err != nil {
		t.Fatalf("meshtrain %s: %v", strings.Join(args, " "), err)
	}
}

func accuracy(probs []float32, labels []uint8) float64 {
	k := len(probs) / len(labels)
	right := 0
	for i, y := range labels {
		p := probs[i*k : (i+1)*k]
		if slices.Index(p, slices.Max(p)) == int(y) {
			right++
		}
	}
	return float64(right) / float64(len(labels))
}

// TestWeightsInAndOut trains a Keras file's CNN, then: eval
// --predictions writes N × 3 probabilities; export --format tfjs writes
// a model.json whose weights eval --model-file scores alike with no
// checkpoint (weights out, then in: the permutations undo each other),
// and from which train starts (at a learning rate too small to move a
// float32, it ends with the checkpoint's very parameters;
// --ignore-weights starts afresh); export --format onnx writes a model that onnxruntime runs
// alike, and the TF.js one predicts alike in TF.js, where node is.
func TestWeightsInAndOut(t *testing.T) {
	t.Setenv(data.EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	set := bandSet(900, 120, 8, 8, 3)
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteMNIST(filepath.Join(dir, "data"), set, false); err != nil {
		t.Fatal(err)
	}
	dataArgs := []string{"--data-dir", filepath.Join(dir, "data"), "--allow-unverified"}
	modelFile := filepath.Join(dir, "band.json")
	if err := os.WriteFile(modelFile, []byte(bandCNN), 0o644); err != nil {
		t.Fatal(err)
	}
	ckdir := filepath.Join(dir, "ck")
	// One worker: train writes no checkpoints, a worker does.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv("TF_CONFIG", `{"cluster": {"worker": ["`+addr+`"]}, "task": {"type": "worker", "index": 0}}`)
	t.Setenv("MESHTRAIN_CLUSTER_SECRET", strings.Repeat("cd", 32))
	run(t, append([]string{"worker", "--model-file", modelFile, "--epochs", "2", "--batch", "32", "--checkpoint-dir", ckdir}, dataArgs...)...)
	cks, _ := filepath.Glob(filepath.Join(ckdir, "ckpt-*.safetensors"))
	if len(cks) == 0 {
		t.Fatal("no checkpoint written")
	}
	ck := cks[len(cks)-1]

	preds := filepath.Join(dir, "preds.npy")
	run(t, append([]string{"eval", "--checkpoint", ck, "--predictions", preds}, dataArgs...)...)
	shape, p := readNpy(t, preds)
	if !slices.Equal(shape, []int{120, 3}) {
		t.Fatalf("predictions of shape %v, want [120 3]", shape)
	}
	for i := range 120 {
		if s := p[3*i] + p[3*i+1] + p[3*i+2]; math.Abs(float64(s)-1) > 1e-5 {
			t.Fatalf("example %d: probabilities %v sum to %v", i, p[3*i:3*i+3], s)
		}
	}
	acc := accuracy(p, set.Test.Labels)
	if acc < 0.9 {
		t.Errorf("accuracy %.3f after training: the band set is learnt to ≥ 0.9", acc)
	}

	web := filepath.Join(dir, "web")
	run(t, "export", "--checkpoint", ck, "--format", "tfjs", "--out", web)
	preds2 := filepath.Join(dir, "preds2.npy")
	run(t, append([]string{"eval", "--model-file", filepath.Join(web, "model.json"), "--predictions", preds2}, dataArgs...)...)
	if _, p2 := readNpy(t, preds2); !near(p2, p, 1e-6) {
		t.Errorf("eval of the exported model.json's weights differs from the checkpoint's:\n%v\n%v", p2[:9], p[:9])
	}

	trained, _, err := evaluate.Load(ck, nil)
	if err != nil {
		t.Fatal(err)
	}
	ckHash := mirrored.ParamsHash(trained.Params())
	summary := filepath.Join(dir, "summary.json")
	for _, ignore := range []bool{false, true} {
		args := append([]string{"train", "--model-file", filepath.Join(web, "model.json"), "--epochs", "1", "--batch", "32", "--lr", "1e-20", "--summary", summary}, dataArgs...)
		if ignore {
			args = append(args, "--ignore-weights")
		}
		run(t, args...)
		b, err := os.ReadFile(summary)
		if err != nil {
			t.Fatal(err)
		}
		var res mirrored.Result
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		// At that rate no float32 moves: a run that started from the
		// weights ends with the checkpoint's parameters, bit for bit.
		if started := res.ParamsSHA256 == ckHash; started == ignore {
			t.Errorf("--ignore-weights %v: parameters %s, the checkpoint's %s", ignore, res.ParamsSHA256, ckHash)
		}
	}

	onnxFile := filepath.Join(dir, "band.onnx")
	run(t, "export", "--checkpoint", ck, "--format", "onnx", "--out", onnxFile)
	// The test images as stored: the exported models' first layer applies
	// the normalisation the checkpoint's model was trained with (which
	// the checkpoint records); one channel, so nn's order is Keras's.
	rec, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	if rec.InputStd == 0 {
		t.Fatal("the checkpoint records no input normalisation")
	}
	set.Test.Norm = data.NoNorm
	x, _ := replica.Examples(set.Test, 0, set.Test.N)
	xb := make([]byte, 0, 4*len(x))
	for _, v := range x {
		xb = binary.LittleEndian.AppendUint32(xb, math.Float32bits(v))
	}
	xfile := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(xfile, xb, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pkg, script, model string }{
		{"onnxruntime-web", filepath.Join("..", "..", "nn", "onnx", "testdata", "ort_predict.js"), onnxFile},
		{"@tensorflow/tfjs", filepath.Join("..", "..", "nn", "kerasio", "testdata", "tfjs_predict.js"), filepath.Join(web, "model.json")},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			mods := nodetest.Modules(t, tc.pkg)
			out := filepath.Join(t.TempDir(), "y.bin")
			nodetest.Run(t, []string{mods}, tc.script, tc.model, xfile, "[120, 8, 8, 1]", out)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(b)/4)
			for i := range y {
				y[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			if !near(y, p, 1e-4) {
				t.Errorf("%s predicts otherwise than meshtrain eval:\n%v\n%v", tc.pkg, y[:9], p[:9])
			}
		})
	}
}

func near(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !(math.Abs(float64(a[i]-b[i])) <= tol) {
			return false
		}
	}
	return true
}

// TestWeightsRefused: bad weight files are usage errors (exit 2) naming
// the weight and the file, for eval and train alike; export refuses a
// bad format.
func TestWeightsRefused(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	web := filepath.Join(dir, "web")
	// A model.json with weights, written by meshtrain: softmax regression.
	if err := os.MkdirAll(web, 0o755); err != nil {
		t.Fatal(err)
	}
	const model = `{"format": "layers-model", "modelTopology": {"class_name": "Sequential", "config": {"name": "s", "layers": [
 {"class_name": "Flatten", "config": {"name": "flatten", "batch_input_shape": [null, 28, 28, 1]}},
 {"class_name": "Dense", "config": {"name": "dense", "units": 10, "activation": "softmax"}}]}},
 "weightsManifest": [{"paths": ["w.bin"], "weights": [{"name": "dense/kernel", "shape": [784, 10], "dtype": "float32"}, {"name": "dense/bias", "shape": [10], "dtype": "float32"}]}]}`
	write := func(name, s string, size int) string {
		p := filepath.Join(web, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if size >= 0 {
			if err := os.WriteFile(filepath.Join(web, "w.bin"), make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	good := 4 * (7840 + 10)
	for _, tc := range []struct {
		name, json string
		size       int
		want       string
	}{
		{"short", model, good - 4, "weight file " + filepath.Join(web, "w.bin") + ": 31396 bytes, the weightsManifest's weights take 31400: weight dense/bias (bytes 31360 to 31400) is past the end"},
		{"long", model, good + 1, "1 more than the weightsManifest's weights take (after the last, dense/bias)"},
		{"shape", strings.Replace(model, "[784, 10]", "[10, 784]", 1), good, "weight dense/kernel in " + filepath.Join(web, "w.bin")},
		{"extra", strings.Replace(model, `"dtype": "float32"}]}]}`, `"dtype": "float32"}, {"name": "dense/gamma", "shape": [1], "dtype": "float32"}]}]}`, 1), good + 4, "weight dense/gamma in"},
		{"missing", strings.Replace(model, `, {"name": "dense/bias", "shape": [10], "dtype": "float32"}`, "", 1), good - 40, "the model's weight dense/bias (layer 1 \"dense\", Dense, shape [10]) is not in the weightsManifest"},
		{"dtype", strings.Replace(model, `"shape": [10], "dtype": "float32"`, `"shape": [10], "dtype": "int32"`, 1), good, `weight dense/bias: dtype "int32"`},
		{"no file", strings.Replace(model, "w.bin", "absent.bin", 1), -1, "absent.bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write("model.json", tc.json, tc.size)
			for _, args := range [][]string{
				{"eval", "--model-file", p, "--data-dir", missing},
				{"train", "--model-file", p, "--data-dir", missing},
			} {
				err := newApp().Run(append([]string{"meshtrain", "--log-level", "error"}, args...))
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v\nwant a usage error (exit 2) containing %q", args[0], err, tc.want)
				}
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--checkpoint", missing, "--format", "h5", "--out", dir}, `--format "h5": want tfjs or onnx`},
		{[]string{"export", "--checkpoint", missing, "--out", dir}, "export needs --format"},
		{[]string{"export", "--checkpoint", missing, "--format", "onnx", "--out", filepath.Join(dir, "m.onnx")}, missing},
		{[]string{"eval", "--data-dir", missing}, "eval needs --checkpoint FILE"},
	} {
		err := newApp().Run(append([]string{"meshtrain", "--log-level", "error"}, tc.args...))
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v\nwant a usage error containing %q", tc.args, err, tc.want)
		}
	}
}
