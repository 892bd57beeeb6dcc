package data

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// idxSet is a data set in MNIST's format that is not MNIST: n training
// and n/2 test images of rows×cols pixels, labels i mod classes.
func idxSet(n, rows, cols, classes int) *MNIST {
	gen := func(n int, salt byte) *Images {
		im := &Images{N: n, Rows: rows, Cols: cols, Pixels: make([]uint8, n*rows*cols), Labels: make([]uint8, n)}
		for i := range im.Pixels {
			im.Pixels[i] = byte(i*7) ^ salt
		}
		for i := range im.Labels {
			im.Labels[i] = uint8(i % classes)
		}
		return im
	}
	return &MNIST{Train: gen(n, 1), Test: gen(n/2, 2), Classes: classes}
}

// TestOtherIDXDataSet: IDX sets that are not the published MNIST (other
// images, class counts and sizes; raw and gzipped) are refused with a
// message naming --allow-unverified, and load with AllowUnverified, their
// class count taken from the labels.
func TestOtherIDXDataSet(t *testing.T) {
	t.Setenv(EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		rows, cols, classes int
		gz                  bool
	}{{10, 12, 3, true}, {28, 28, 26, false}, {28, 28, 10, true}} {
		t.Run(fmt.Sprintf("%dx%d %d classes gz %v", tc.rows, tc.cols, tc.classes, tc.gz), func(t *testing.T) {
			dir := t.TempDir()
			want := idxSet(40, tc.rows, tc.cols, tc.classes)
			if err := WriteMNIST(dir, want, tc.gz); err != nil {
				t.Fatal(err)
			}
			opts := MNISTOptions{Dir: dir, Registry: "http://127.0.0.1:1/", Logger: zaptest.NewLogger(t)}
			if _, err := LoadMNIST(testCtx(t), opts); err == nil || !strings.Contains(err.Error(), "pass --allow-unverified") {
				t.Fatalf("unverified files without the flag: %v; want a refusal naming --allow-unverified", err)
			}
			opts.AllowUnverified = true
			got, err := LoadMNIST(testCtx(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			if got.Classes != tc.classes {
				t.Errorf("%d classes, want %d", got.Classes, tc.classes)
			}
			for i, pair := range [][2]*Images{{got.Train, want.Train}, {got.Test, want.Test}} {
				g, w := pair[0], pair[1]
				if g.N != w.N || g.Rows != w.Rows || g.Cols != w.Cols || !bytes.Equal(g.Pixels, w.Pixels) || !bytes.Equal(g.Labels, w.Labels) {
					t.Errorf("set %d: read %d×%d×%d, wrote %d×%d×%d (or other bytes)", i, g.N, g.Rows, g.Cols, w.N, w.Rows, w.Cols)
				}
			}
		})
	}
}

// TestOtherIDXDataSetErrors: the training and test images must have one
// size, and the labels must name at least two classes.
func TestOtherIDXDataSetErrors(t *testing.T) {
	t.Setenv(EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	sizes := idxSet(8, 10, 12, 3)
	sizes.Test = idxSet(8, 12, 10, 3).Test
	one := idxSet(8, 4, 4, 1)
	for _, tc := range []struct {
		name string
		m    *MNIST
		want string
	}{
		{"sizes differ", sizes, "holds 10×12 images but"},
		{"one class", one, "a classification data set needs at least 2 classes"},
	} {
		dir := t.TempDir()
		if err := WriteMNIST(dir, tc.m, false); err != nil {
			t.Fatal(err)
		}
		_, err := LoadMNIST(testCtx(t), MNISTOptions{Dir: dir, AllowUnverified: true, Registry: "http://127.0.0.1:1/"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
