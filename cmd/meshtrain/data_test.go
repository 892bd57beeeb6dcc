package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"codeberg.org/sbinet/npyio/npy"
	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// tumourTable writes a table shaped as the Wisconsin breast-cancer data
// (569 rows, 30 numeric measurements on scales from 0.01 to 1,000, a
// string column, the diagnosis B or M as the label) where each
// measurement's mean differs by 0.8 deviations between the classes:
// about 98% separable, as the real table is. It is used when Debian's
// scikit-learn table is not installed.
func tumourTable(t *testing.T, path string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(569, 30))
	var b strings.Builder
	for j := range 30 {
		fmt.Fprintf(&b, "m%02d,", j)
	}
	b.WriteString("site,diagnosis\n")
	for i := range 569 {
		malignant := i%8 < 3
		for j := range 30 {
			scale := []float64{0.01, 1, 10, 1000}[j%4]
			v := rng.NormFloat64()
			if malignant {
				v += 0.8
			}
			fmt.Fprintf(&b, "%.5g,", scale*(3+v))
		}
		fmt.Fprintf(&b, "%s,%s\n", []string{"left", "right"}[rng.IntN(2)], map[bool]string{true: "M", false: "B"}[malignant])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mlpJSON is a Keras MLP (tf.keras 2's model.to_json()) of in inputs,
// a hidden Dense of 16 ReLUs and a softmax over classes.
func mlpJSON(in, classes int) string {
	dense := func(name string, units int, act string) string {
		return fmt.Sprintf(`{"class_name": "Dense", "config": {"name": %q, "units": %d, "activation": %q, "use_bias": true}}`, name, units, act)
	}
	return fmt.Sprintf(`{"class_name": "Sequential", "config": {"name": "mlp", "layers": [`+
		`{"class_name": "InputLayer", "config": {"batch_input_shape": [null, %d], "dtype": "float32", "name": "features"}}, %s, %s]}}`,
		in, dense("hidden", 16, "relu"), dense("scores", classes, "softmax"))
}

// TestTrainCSVKerasMLP: a tumour table as CSV trains a Keras MLP file to
// at least 95% test accuracy through train --data; a run's checkpoint
// records the columns' standardisation and the class names, and eval,
// reading the table again, encodes it as training did and scores the
// same accuracy.
func TestTrainCSVKerasMLP(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "breast_cancer.csv")
	tumourTable(t, table)
	model := filepath.Join(dir, "mlp.json")
	if err := os.WriteFile(model, []byte(mlpJSON(32, 2)), 0o644); err != nil { // 30 numbers and site one-hot (2)
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "run.json")
	err := newApp().RunContext(context.Background(), []string{"meshtrain", "--log-level", "error", "train",
		"--data", table, "--label-column", "diagnosis", "--validation-split", "0.2", "--model-file", model,
		"--epochs", "15", "--batch", "32", "--lr", "0.05", "--summary", summary})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Accuracy float64  `json:"final_test_accuracy"`
		Test     int      `json:"test_examples"`
		Classes  []string `json:"class_names"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("train --data %s: test accuracy %.4f on %d rows", filepath.Base(table), res.Accuracy, res.Test)
	if !slices.Equal(res.Classes, []string{"B", "M"}) {
		t.Errorf("the summary's class names %v, want [B M]", res.Classes)
	}
	if res.Accuracy < 0.95 || res.Test < 80 || res.Test > 150 {
		t.Errorf("test accuracy %.3f on %d rows; want ≥ 0.95 on about a fifth of 569", res.Accuracy, res.Test)
	}

	m, err := keras.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mirrored.DefaultConfigFor(nn0)
	cfg.Model, cfg.Data, cfg.Epochs, cfg.BatchSize, cfg.LR = modelKeras, table, 5, 32, 0.05
	cfg.DataRead = data.ReadOptions{ValidationSplit: 0.2, LabelColumn: "diagnosis"}
	cfg.Logger = zaptest.NewLogger(t)
	job := mirrored.Job{Config: cfg, NewModel: m.NewModel, CheckpointDir: filepath.Join(dir, "ckpt")}
	sum, err := mirrored.Train(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	cks, _ := filepath.Glob(filepath.Join(dir, "ckpt", "ckpt-*.safetensors"))
	if len(cks) == 0 {
		t.Fatal("no checkpoint")
	}
	slices.Sort(cks)
	ev, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: cks[len(cks)-1], Data: table,
		DataRead: data.ReadOptions{ValidationSplit: 0.2, LabelColumn: "diagnosis"}})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != sum.Run.FinalAccuracy || !slices.Equal(ev.ClassNames, []string{"B", "M"}) {
		t.Errorf("eval: accuracy %v, classes %v; the run's %v, want [B M]", ev.Accuracy, ev.ClassNames, sum.Run.FinalAccuracy)
	}
	exportedTakesRawRows(t, cks[len(cks)-1], table)
}

// exportedTakesRawRows: the model an export writes from a table's
// checkpoint starts with a Normalization of the standardised columns, so
// that fed a row's numbers as read (and its strings one-hot) it predicts
// what the checkpoint's model predicts from the row as training encoded
// it.
func exportedTakesRawRows(t *testing.T, ck, table string) {
	t.Helper()
	model, arch, err := evaluate.Load(ck, nil)
	if err != nil {
		t.Fatal(err)
	}
	arch2, model2, added, err := evaluate.WithInputNorm(ck, arch, model)
	if err != nil || added != "normalization" || len(arch2.Layers) != len(arch.Layers)+1 {
		t.Fatalf("the export's model: %v, added %q, %d layers after %d", err, added, len(arch2.Layers), len(arch.Layers))
	}
	rec, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	var f data.Features
	if err := json.Unmarshal([]byte(rec.Features), &f); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	header := strings.Split(lines[0], ",")
	var raw, coded []float32
	for _, line := range lines[1:6] {
		cells := strings.Split(line, ",")
		for _, c := range f.Columns {
			cell := cells[slices.Index(header, c.Name)]
			if len(c.Values) > 0 {
				for _, v := range c.Values {
					x := float32(0)
					if v == cell {
						x = 1
					}
					raw, coded = append(raw, x), append(coded, x)
				}
				continue
			}
			v, err := strconv.ParseFloat(cell, 64)
			if err != nil {
				t.Fatal(err)
			}
			raw, coded = append(raw, float32(v)), append(coded, float32((v-c.Mean)/c.Std))
		}
	}
	p1, p2 := make([]float32, 5*2), make([]float32, 5*2)
	if err := model.(nn.Predictor).Predict(coded, 5, p1); err != nil {
		t.Fatal(err)
	}
	if err := model2.(nn.Predictor).Predict(raw, 5, p2); err != nil {
		t.Fatal(err)
	}
	for i := range p1 {
		if math.Abs(float64(p1[i]-p2[i])) > 1e-5 {
			t.Fatalf("the exported model on raw rows predicts %v, the checkpoint's on encoded rows %v", p2, p1)
		}
	}
}

// nn0 is a built-in model's name, whose recipe a model file's job starts
// from (as --model-file does: lenet's).
const nn0 = "lenet"

// TestDataBadInputsExit2: every bad --data is refused with exit 2 before
// any training step, naming the file and what to do.
func TestDataBadInputsExit2(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	npz := func(name string, members map[string]any) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, k := range []string{"x_train", "y_train", "x_test", "y_test"} {
			v, ok := members[k]
			if !ok {
				continue
			}
			w, _ := zw.Create(k + ".npy")
			w.Write(npyOf(t, v))
		}
		zw.Close()
		return write(name, buf.Bytes())
	}
	imgs := [][][]uint8{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 1}, {2, 3}}}
	good := map[string]any{"x_train": imgs, "y_train": []uint8{0, 1, 0}, "x_test": imgs[:2], "y_test": []uint8{1, 0}}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	pngAt := func(p string) {
		var buf bytes.Buffer
		png.Encode(&buf, image.NewGray(image.Rect(0, 0, 2, 2)))
		write(p, buf.Bytes())
	}
	for _, p := range []string{"folder/train/a/1.png", "folder/train/b/1.png", "folder/test/a/1.png", "folder/test/b/1.png",
		"empty/a/1.png", "empty/b/1.png"} {
		pngAt(p)
	}
	write("folder/train/b/2.png", []byte("\x89PNG\r\n\x1a\ntruncated"))
	os.MkdirAll(filepath.Join(dir, "empty", "c"), 0o755)
	fifo := filepath.Join(dir, "fifo.npz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing key", []string{"--data", npz("missing.npz", with("y_test", nil))}, "missing.npz has no array y_test"},
		{"x and y disagree", []string{"--data", npz("xy.npz", with("y_train", []uint8{0, 1}))}, "holds 3 images but"},
		{"train and test disagree", []string{"--data", npz("tt.npz", with("x_test", [][][]uint8{{{1, 2, 3}}, {{4, 5, 6}}}))}, "must have one shape and type"},
		{"label outside the classes", []string{"--data", npz("label.npz", with("y_test", []int64{1, 300}))}, "label 300 of example 1 is out of range"},
		{"corrupt image", []string{"--data", filepath.Join(dir, "folder")}, filepath.Join("train", "b", "2.png") + ": corrupt image"},
		{"empty class folder", []string{"--data", filepath.Join(dir, "empty"), "--validation-split", "0.5"}, "c holds no image files"},
		{"FIFO", []string{"--data", fifo}, fifo},
		{"CSV wrong field count", []string{"--data", write("t.csv", []byte("a,b,label\n1,2,0\n3,4\n")), "--validation-split", "0.5"}, "t.csv: line 3: the row has another number of fields"},
		{"bad image size", []string{"--data", dir, "--image-size", "0x3"}, "--image-size"},
		{"split without data", []string{"--validation-split", "0.2"}, "--validation-split reads a --data set"},
		{"bad format", []string{"--data", dir, "--data-format", "parquet"}, `--data-format "parquet"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"meshtrain", "--log-level", "error", "train", "--model", "softmax", "--epochs", "1"}, c.args...)
			ctx := context.Background()
			err := newApp().RunContext(ctx, args)
			if err == nil || exitCode(ctx, err) != exitUsage || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v (exit %d)\nwant exit 2 naming %q", err, exitCode(ctx, err), c.want)
			}
		})
	}
}

// npyOf is the .npy file of v (nested slices give the shape), as npyio
// writes it.
func npyOf(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := npy.Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// cnnJSON is a small Keras 3 CNN for h×w×c images in classes classes:
// Conv2D 8 3×3 ReLU, MaxPooling2D 2, Flatten, Dense softmax.
func cnnJSON(h, w, c, classes int) string {
	return fmt.Sprintf(`{"class_name": "Sequential", "config": {"name": "cnn", "layers": [`+
		`{"class_name": "InputLayer", "config": {"batch_shape": [null, %d, %d, %d], "dtype": "float32", "name": "in"}},`+
		`{"class_name": "Conv2D", "config": {"name": "conv", "filters": 8, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format": "channels_last", "activation": "relu", "use_bias": true}},`+
		`{"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": [2, 2], "strides": [2, 2], "padding": "valid", "data_format": "channels_last"}},`+
		`{"class_name": "Flatten", "config": {"name": "flat", "data_format": "channels_last"}},`+
		`{"class_name": "Dense", "config": {"name": "out", "units": %d, "activation": "softmax", "use_bias": true}}]}}`, h, w, c, classes)
}

// TestTrainColourFolderKerasCNN: a folder of class folders of colour
// images (PNG and JPEG, some of them greyscale files, of two sizes)
// trains a Keras CNN file taking 8×8×3 through train --data with
// --validation-split and --image-size; a model taking greyscale is
// refused with exit 2 naming both shapes.
func TestTrainColourFolderKerasCNN(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 3))
	names := []string{"blue", "green", "red"}
	for c, name := range names {
		for i := range 40 {
			size := 8 + 4*(i%2) // 8×8 and 12×12 files, resized to 8×8
			img := image.NewNRGBA(image.Rect(0, 0, size, size))
			for y := range size {
				for x := range size {
					var px [3]uint8
					for k := range px {
						px[k] = uint8(rng.IntN(90))
					}
					px[2-c] = uint8(150 + rng.IntN(100)) // blue, green, red: channel 2, 1, 0
					if i%7 == 0 && (x+y)%2 == 0 {
						px = [3]uint8{} // a dark checker on a few
					}
					img.Set(x, y, color.NRGBA{px[0], px[1], px[2], 255})
				}
			}
			var buf bytes.Buffer
			ext := ".png"
			if i%3 == 0 {
				ext = ".jpg"
				jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95})
			} else {
				png.Encode(&buf, img)
			}
			p := filepath.Join(dir, "photos", name, fmt.Sprintf("%02d%s", i, ext))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A greyscale file among the colour ones: read as R = G = B.
	grey := image.NewGray(image.Rect(0, 0, 8, 8))
	var buf bytes.Buffer
	png.Encode(&buf, grey)
	os.WriteFile(filepath.Join(dir, "photos", "red", "grey.png"), buf.Bytes(), 0o644)

	model := filepath.Join(dir, "cnn.json")
	os.WriteFile(model, []byte(cnnJSON(8, 8, 3, 3)), 0o644)
	summary := filepath.Join(dir, "run.json")
	err := newApp().RunContext(context.Background(), []string{"meshtrain", "--log-level", "error", "train",
		"--data", filepath.Join(dir, "photos"), "--validation-split", "0.25", "--image-size", "8x8", "--model-file", model,
		"--epochs", "8", "--batch", "16", "--lr", "0.05", "--summary", summary})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(summary)
	var res struct {
		Accuracy float64  `json:"final_test_accuracy"`
		Test     int      `json:"test_examples"`
		Classes  []string `json:"class_names"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("train --data photos/: test accuracy %.4f on %d images", res.Accuracy, res.Test)
	if res.Accuracy < 0.9 || !slices.Equal(res.Classes, names) || res.Test < 15 {
		t.Errorf("test accuracy %.3f on %d images, classes %v; want ≥ 0.9 over %v", res.Accuracy, res.Test, res.Classes, names)
	}

	os.WriteFile(model, []byte(cnnJSON(8, 8, 1, 3)), 0o644)
	ctx := context.Background()
	err = newApp().RunContext(ctx, []string{"meshtrain", "--log-level", "error", "train",
		"--data", filepath.Join(dir, "photos"), "--validation-split", "0.25", "--image-size", "8x8", "--model-file", model})
	const want = "the model takes inputs of 8×8×1 (layer 0 \"in\" (InputLayer)); the data set's are 8×8×3"
	if err == nil || exitCode(ctx, err) != exitUsage || !strings.Contains(err.Error(), want) {
		t.Errorf("a greyscale model on colour data: %v (exit %d), want exit 2 naming %q", err, exitCode(ctx, err), want)
	}
	// The built-in LeNet-5 takes 28×28 greyscale images: colour ones are
	// the user's to fix, exit 2 before any step, as a model file's are.
	err = newApp().RunContext(ctx, []string{"meshtrain", "--log-level", "error", "train",
		"--data", filepath.Join(dir, "photos"), "--validation-split", "0.25", "--image-size", "8x8", "--model", "lenet"})
	const lenet = "lenet takes 28×28 greyscale images, these are 8×8×3"
	if err == nil || exitCode(ctx, err) != exitUsage || !strings.Contains(err.Error(), lenet) {
		t.Errorf("LeNet-5 on colour data: %v (exit %d), want exit 2 naming %q", err, exitCode(ctx, err), lenet)
	}
}

// colourNPZ writes a Keras-layout .npz of n training and m test h×w×3
// uint8 images in classes classes (class c brightest in channel c mod 3,
// plus noise).
func colourNPZ(t *testing.T, path string, n, m, h, w, classes int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(h)))
	set := &data.ImageSet{}
	for i, count := range []int{n, m} {
		im := &data.Images{N: count, Rows: h, Cols: w, Channels: 3, Pixels: make([]uint8, count*h*w*3), Labels: make([]uint8, count), Norm: data.UnitNorm}
		for k := range count {
			c := k % classes
			im.Labels[k] = uint8(c)
			for p := range h * w * 3 {
				v := rng.IntN(100)
				if p%3 == c%3 {
					v += 100 + 50*(c/3)
				}
				im.Pixels[k*h*w*3+p] = uint8(min(v, 255))
			}
		}
		if i == 0 {
			set.Train = im
		} else {
			set.Test = im
		}
	}
	if err := data.WriteNPZ(path, set); err != nil {
		t.Fatal(err)
	}
}

// TestTrainResNet20Colour: colour 32×32×3 images in a .npz train
// ResNet-20 read from a Keras 3 file (a graph with Add) through
// train --data: a few steps, the loss finite, the run's checkpoint
// recording 3 channels. Its accuracy is not the point (two epochs of 64
// images); that the file takes the data's shape and trains is.
func TestTrainResNet20Colour(t *testing.T) {
	if testing.Short() {
		t.Skip("ResNet-20 steps take seconds")
	}
	dir := t.TempDir()
	set := filepath.Join(dir, "cifar-like.npz")
	colourNPZ(t, set, 64, 16, 32, 32, 10)
	m, err := keras.ReadFile(kerasFixture("resnet20_keras3.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := mirrored.DefaultConfigFor(nn0)
	cfg.Model, cfg.Data, cfg.Epochs, cfg.BatchSize, cfg.LR = modelKeras, set, 2, 16, 0.02
	cfg.Logger = zaptest.NewLogger(t)
	job := mirrored.Job{Config: cfg, NewModel: m.NewModel, CheckpointDir: filepath.Join(dir, "ckpt")}
	sum, err := mirrored.Train(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	res := sum.Run
	if res.Steps != 8 || len(res.EpochResults) != 2 || !(res.EpochResults[1].Loss < 100) {
		t.Fatalf("%d steps, epochs %+v", res.Steps, res.EpochResults)
	}
	cks, _ := filepath.Glob(filepath.Join(dir, "ckpt", "ckpt-*.safetensors"))
	slices.Sort(cks)
	ev, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: cks[len(cks)-1], Data: set})
	if err != nil || ev.Accuracy != res.FinalAccuracy {
		t.Errorf("eval: %v, accuracy %v; the run's %v", err, ev, res.FinalAccuracy)
	}
}

// TestRescalingTakesRawPixels: the normalisation rule end to end: a Keras
// file whose first layer is Rescaling(1/255) is fed the stored bytes
// (the checkpoint records x, not x/255), one without it x/255; eval
// applies the same rule to each.
func TestRescalingTakesRawPixels(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "colour.npz")
	colourNPZ(t, set, 96, 24, 4, 4, 3)
	const head = `{"class_name": "Sequential", "config": {"name": "m", "layers": [` +
		`{"class_name": "InputLayer", "config": {"batch_shape": [null, 4, 4, 3], "dtype": "float32", "name": "in"}},`
	const tail = `{"class_name": "Flatten", "config": {"name": "f", "data_format": "channels_last"}},` +
		`{"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax", "use_bias": true}}]}}`
	for _, c := range []struct {
		name, layers string
		scale        float64
	}{
		{"rescaling first", `{"class_name": "Rescaling", "config": {"name": "r", "scale": 0.00392156862745098, "offset": 0.0}},`, 1},
		{"no rescaling", "", 255},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := keras.Parse([]byte(head + c.layers + tail))
			if err != nil {
				t.Fatal(err)
			}
			cfg := mirrored.DefaultConfigFor(nn0)
			cfg.Model, cfg.Data, cfg.Epochs, cfg.BatchSize, cfg.LR = modelKeras, set, 3, 16, 0.05
			cfg.Logger = zaptest.NewLogger(t)
			ckdir := filepath.Join(t.TempDir(), "ckpt")
			sum, err := mirrored.Train(context.Background(), mirrored.Job{Config: cfg, NewModel: m.NewModel, CheckpointDir: ckdir})
			if err != nil {
				t.Fatal(err)
			}
			cks, _ := filepath.Glob(filepath.Join(ckdir, "ckpt-*.safetensors"))
			slices.Sort(cks)
			last := cks[len(cks)-1]
			ck, err := checkpoint.Read(last)
			if err != nil {
				t.Fatal(err)
			}
			if ck.InputScale != c.scale || ck.InputMean != 0 || ck.InputStd != 1 || ck.Channels != 3 {
				t.Errorf("checkpoint records (x/%v - %v)/%v, %d channels; want x/%v, 3", ck.InputScale, ck.InputMean, ck.InputStd, ck.Channels, c.scale)
			}
			ev, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: last, Data: set})
			if err != nil || ev.Accuracy != sum.Run.FinalAccuracy || sum.Run.FinalAccuracy < 0.9 {
				t.Errorf("eval %v (%v); the run's accuracy %v, want ≥ 0.9 and the same", ev, err, sum.Run.FinalAccuracy)
			}
		})
	}
}

// TestTrainTokenSequences: a text classifier trains from token ids in a
// .npz (x N×L int32, as keras.datasets.imdb's padded sequences; the ids
// reach the model as float32): a Keras
// file of Embedding, Flatten and Dense. Skipped while nn/keras reads no
// Embedding (another branch brings it).
func TestTrainTokenSequences(t *testing.T) {
	const vocab, length = 101, 12
	model := fmt.Sprintf(`{"class_name": "Sequential", "config": {"name": "text", "layers": [`+
		`{"class_name": "InputLayer", "config": {"batch_shape": [null, %d], "dtype": "float32", "name": "tokens"}},`+
		`{"class_name": "Embedding", "config": {"name": "emb", "input_dim": %d, "output_dim": 8}},`+
		`{"class_name": "Flatten", "config": {"name": "f", "data_format": "channels_last"}},`+
		`{"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax", "use_bias": true}}]}}`, length, vocab)
	m, err := keras.Parse([]byte(model))
	if err != nil {
		if strings.Contains(err.Error(), "Embedding") {
			t.Skipf("nn/keras reads no Embedding here: %v", err)
		}
		t.Fatal(err)
	}
	// Class 0's documents use words 1..50, class 1's 51..100 (0 pads).
	rng := rand.New(rand.NewPCG(101, 12))
	seqs := func(n int) ([][]int32, []uint8) {
		x, y := make([][]int32, n), make([]uint8, n)
		for i := range x {
			y[i] = uint8(i % 2)
			x[i] = make([]int32, length)
			for j := range rng.IntN(length-3) + 3 {
				x[i][j] = int32(1 + 50*int(y[i]) + rng.IntN(50))
			}
		}
		return x, y
	}
	xtr, ytr := seqs(256)
	xte, yte := seqs(64)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, v := range map[string]any{"x_train": xtr, "y_train": ytr, "x_test": xte, "y_test": yte} {
		w, _ := zw.Create(name + ".npy")
		w.Write(npyOf(t, v))
	}
	zw.Close()
	path := filepath.Join(t.TempDir(), "text.npz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := mirrored.DefaultConfigFor(nn0)
	cfg.Model, cfg.Data, cfg.Epochs, cfg.BatchSize, cfg.LR = modelKeras, path, 5, 16, 0.05
	cfg.Logger = zaptest.NewLogger(t)
	sum, err := mirrored.Train(context.Background(), mirrored.Job{Config: cfg, NewModel: m.NewModel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("token sequences, Embedding classifier: test accuracy %.4f", sum.Run.FinalAccuracy)
	if sum.Run.FinalAccuracy < 0.9 {
		t.Errorf("test accuracy %.3f, want ≥ 0.9 (the two classes use disjoint words)", sum.Run.FinalAccuracy)
	}
}

// idxDirs are where an MNIST-like set's four IDX files may be: Debian's
// dataset-fashion-mnist (Fashion-MNIST), and meshtrain's MNIST cache.
func idxDirs() map[string][]string {
	cache, _ := os.UserCacheDir()
	// The package installs /usr/share/datasets/fashion-mnist.
	fashion, _ := filepath.Glob("/usr/share/datasets/fashion-mnist*")
	more, _ := filepath.Glob("/usr/share/dataset-fashion-mnist*")
	return map[string][]string{
		"Fashion-MNIST": append(fashion, more...),
		"MNIST":         {filepath.Join(cache, "meshtrain", "mnist")},
	}
}

// TestNPZTrainsAsIDX: an IDX set (Fashion-MNIST from Debian's package,
// MNIST from meshtrain's cache; each skipped when absent) saved as a
// Keras .npz in a temporary directory trains softmax regression to
// about the accuracy the IDX files give (within 1.5 points after one
// epoch: the .npz is fed x/255, the IDX files MNIST's recipe).
func TestNPZTrainsAsIDX(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on tens of thousands of images")
	}
	for name, dirs := range idxDirs() {
		t.Run(name, func(t *testing.T) {
			var set *data.ImageSet
			for _, dir := range dirs {
				s, err := data.ReadMNISTDir(dir, data.MNISTOptions{AllowUnverified: true})
				if err == nil {
					set = s
					break
				}
			}
			if set == nil {
				t.Skipf("%s's IDX files are in none of %v", name, dirs)
			}
			path := filepath.Join(t.TempDir(), "set.npz")
			if err := data.WriteNPZ(path, set); err != nil {
				t.Fatal(err)
			}
			accuracy := func(fromNPZ bool) float64 {
				cfg := mirrored.DefaultConfigFor("softmax")
				cfg.Model, cfg.Epochs, cfg.Logger = "softmax", 1, zaptest.NewLogger(t)
				if fromNPZ {
					cfg.Data = path
				} else {
					cfg.MNIST = set
				}
				sum, err := mirrored.Train(context.Background(), mirrored.Job{Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				return sum.Run.FinalAccuracy
			}
			idx, npz := accuracy(false), accuracy(true)
			t.Logf("%s, softmax, 1 epoch: IDX %.4f, .npz %.4f", name, idx, npz)
			if d := npz - idx; d < -0.015 || d > 0.015 {
				t.Errorf("the .npz trains to %.4f, the IDX files to %.4f", npz, idx)
			}
		})
	}
}

// TestImageFolderTrainsAsIDX: the images of an IDX set (as
// TestNPZTrainsAsIDX finds them), 4,000 of them written as class folders
// of PNG files with every seventh a JPEG and every eleventh an RGB PNG,
// train softmax regression through train --data --validation-split 0.25
// --color-mode grayscale to about the accuracy the same number of IDX
// images give (within 3 points: JPEG's loss, and another test split).
func TestImageFolderTrainsAsIDX(t *testing.T) {
	for name, dirs := range idxDirs() {
		t.Run(name, func(t *testing.T) {
			var set *data.ImageSet
			for _, dir := range dirs {
				if s, err := data.ReadMNISTDir(dir, data.MNISTOptions{AllowUnverified: true}); err == nil {
					set = s
					break
				}
			}
			if set == nil {
				t.Skipf("%s's IDX files are in none of %v", name, dirs)
			}
			const n, m = 3000, 1000
			root := filepath.Join(t.TempDir(), "images")
			k := 0
			for _, part := range []struct {
				im    *data.Images
				count int
			}{{set.Train, n}, {set.Test, m}} {
				for i := range part.count {
					px := part.im.Pixels[i*784 : (i+1)*784]
					var img image.Image = &image.Gray{Pix: px, Stride: 28, Rect: image.Rect(0, 0, 28, 28)}
					if k%11 == 0 {
						rgb := image.NewRGBA(image.Rect(0, 0, 28, 28))
						for j, v := range px {
							rgb.Pix[4*j], rgb.Pix[4*j+1], rgb.Pix[4*j+2], rgb.Pix[4*j+3] = v, v, v, 255
						}
						img = rgb
					}
					var buf bytes.Buffer
					ext := ".png"
					if k%7 == 0 {
						ext = ".jpg"
						jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
					} else {
						png.Encode(&buf, img)
					}
					p := filepath.Join(root, fmt.Sprint(part.im.Labels[i]), fmt.Sprintf("%05d%s", k, ext))
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					k++
				}
			}
			cfg := mirrored.DefaultConfigFor("softmax")
			cfg.Model, cfg.Epochs, cfg.Logger = "softmax", 3, zaptest.NewLogger(t)
			cfg.MNIST, cfg.TrainExamples, cfg.TestExamples = set, n, m
			sum, err := mirrored.Train(context.Background(), mirrored.Job{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			idx := sum.Run.FinalAccuracy
			summary := filepath.Join(t.TempDir(), "run.json")
			if err := newApp().RunContext(context.Background(), []string{"meshtrain", "--log-level", "error", "train", "--model", "softmax",
				"--epochs", "3", "--data", root, "--validation-split", "0.25", "--color-mode", "grayscale", "--summary", summary}); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(summary)
			var res struct {
				Accuracy float64  `json:"final_test_accuracy"`
				Test     int      `json:"test_examples"`
				Classes  []string `json:"class_names"`
			}
			json.Unmarshal(b, &res)
			t.Logf("%s, softmax, 3 epochs of %d: IDX %.4f; folder %.4f on %d held out", name, n, idx, res.Accuracy, res.Test)
			if d := res.Accuracy - idx; d < -0.03 || d > 0.03 || res.Test < 800 || res.Test > 1200 || len(res.Classes) != 10 || res.Classes[3] != "3" {
				t.Errorf("folder: %.4f on %d images, classes %v; IDX %.4f", res.Accuracy, res.Test, res.Classes, idx)
			}
		})
	}
}

// sklearnBreastCancer is where Debian's python3-sklearn keeps the
// Wisconsin breast-cancer table: a first line "569,30,malignant,benign"
// (its counts and class names), then 569 rows of 30 measurements and the
// class, 0 malignant or 1 benign.
const sklearnBreastCancer = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv"

// TestTrainRealBreastCancer: the real table (skipped where scikit-learn's
// copy is not installed), given the header row a pandas user writes
// (to_csv of load_breast_cancer(as_frame=True)), trains the Keras MLP
// file to at least 95% test accuracy, as the generated table does.
func TestTrainRealBreastCancer(t *testing.T) {
	raw, err := os.ReadFile(sklearnBreastCancer)
	if err != nil {
		t.Skipf("scikit-learn's breast-cancer table is not installed (apt-get install python3-sklearn): %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var b strings.Builder
	for j := range 30 {
		fmt.Fprintf(&b, "feature_%02d,", j)
	}
	b.WriteString("diagnosis\n")
	for _, l := range lines[1:] {
		i := strings.LastIndexByte(l, ',')
		b.WriteString(l[:i+1] + map[string]string{"0": "malignant", "1": "benign"}[l[i+1:]] + "\n")
	}
	dir := t.TempDir()
	table, model, summary := filepath.Join(dir, "breast_cancer.csv"), filepath.Join(dir, "mlp.json"), filepath.Join(dir, "run.json")
	if err := os.WriteFile(table, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, []byte(mlpJSON(30, 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	err = newApp().RunContext(context.Background(), []string{"meshtrain", "--log-level", "error", "train",
		"--data", table, "--label-column", "diagnosis", "--validation-split", "0.2", "--model-file", model,
		"--epochs", "15", "--batch", "32", "--lr", "0.05", "--summary", summary})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Accuracy float64  `json:"final_test_accuracy"`
		Test     int      `json:"test_examples"`
		Classes  []string `json:"class_names"`
	}
	if err := json.Unmarshal(sb, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("scikit-learn's breast-cancer table: test accuracy %.4f on %d rows, classes %v", res.Accuracy, res.Test, res.Classes)
	if res.Accuracy < 0.95 || len(lines) != 570 {
		t.Errorf("test accuracy %.3f on %d rows of %d; want ≥ 0.95", res.Accuracy, res.Test, len(lines)-1)
	}
}
