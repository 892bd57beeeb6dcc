package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
)

// bandSet is a learnable IDX data set that is not MNIST: rows×cols images
// of noise in which class c lights up the c-th of classes equal bands.
func bandSet(ntrain, ntest, rows, cols, classes int) *data.MNIST {
	dim, band := rows*cols, rows*cols/classes
	gen := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: rows, Cols: cols, Pixels: make([]uint8, n*dim), Labels: make([]uint8, n)}
		for i := range n {
			c := (i*7 + i/classes) % classes
			im.Labels[i] = uint8(c)
			for j := range dim {
				im.Pixels[i*dim+j] = uint8((i*31 + j*17) % 60)
			}
			for j := c * band; j < (c+1)*band; j++ {
				im.Pixels[i*dim+j] = 200
			}
		}
		return im
	}
	return &data.MNIST{Train: gen(ntrain), Test: gen(ntest)}
}

// TestTrainOtherIDXSets trains through `meshtrain train` on IDX sets that
// are not MNIST: softmax on gzipped 10×12 images in 3 classes, LeNet-5 on
// raw 28×28 images in 26 classes. Without --allow-unverified the refusal
// names the flag; `data mnist --allow-unverified` describes the set.
func TestTrainOtherIDXSets(t *testing.T) {
	t.Setenv(data.EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // no MNIST to fall back on
	for _, tc := range []struct {
		model                      string
		rows, cols, classes, train int
		gz                         bool
		params                     int
	}{
		{"softmax", 10, 12, 3, 600, true, 3*120 + 3},
		{"lenet", 28, 28, 26, 1300, false, 61706 - (84*10 + 10) + (84*26 + 26)},
	} {
		t.Run(tc.model, func(t *testing.T) {
			dir := t.TempDir()
			if err := data.WriteMNIST(dir, bandSet(tc.train, 260, tc.rows, tc.cols, tc.classes), tc.gz); err != nil {
				t.Fatal(err)
			}
			summary := filepath.Join(t.TempDir(), "summary.json")
			args := []string{"meshtrain", "--log-level", "error", "train", "--model", tc.model, "--data-dir", dir,
				"--epochs", "3", "--batch", "32", "--summary", summary}
			err := newApp().Run(args)
			if err == nil || !strings.Contains(err.Error(), "pass --allow-unverified") {
				t.Fatalf("without the flag: %v; want a refusal naming --allow-unverified", err)
			}
			if err := newApp().Run(append(args, "--allow-unverified")); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(summary)
			if err != nil {
				t.Fatal(err)
			}
			var res mirrored.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if res.Params != tc.params || res.FinalAccuracy < 0.9 {
				t.Errorf("%d parameters, final accuracy %.3f; want %d and ≥ 0.9", res.Params, res.FinalAccuracy, tc.params)
			}
		})
	}
}

// TestDataMNISTOtherSet: `data mnist --allow-unverified` accepts another
// IDX set and reports its class count.
func TestDataMNISTOtherSet(t *testing.T) {
	t.Setenv(data.EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	if err := data.WriteMNIST(dir, bandSet(30, 9, 10, 12, 3), true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	if err := app.RunContext(ctx, []string{"meshtrain", "--log-level", "error", "data", "mnist", "--data-dir", dir, "--allow-unverified"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"train-images-idx3-ubyte.gz  30x10x12", "DIFFERS from the published file", "train: 30 examples, test: 9 examples, 3 classes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAllowUnverifiedEverywhere: every command that reads --data-dir
// takes --allow-unverified.
func TestAllowUnverifiedEverywhere(t *testing.T) {
	app := newApp()
	for _, name := range []string{"train", "worker", "launch", "compare", "sweep", "eval"} {
		cmd := app.Command(name)
		if cmd == nil {
			t.Fatalf("no command %s", name)
		}
		found := false
		for _, f := range cmd.Flags {
			found = found || f.Names()[0] == "allow-unverified"
		}
		if !found {
			t.Errorf("%s has no --allow-unverified", name)
		}
	}
}
