package data

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestImagesDigest: a greyscale byte set normalised as MNIST writes the
// bytes the run's data digest hashed before images had shapes (so
// MNIST's digest is unchanged), and every other shape, storage or
// normalisation gives another digest.
func TestImagesDigest(t *testing.T) {
	base := func() *Images {
		return &Images{N: 2, Rows: 1, Cols: 2, Pixels: []uint8{1, 2, 3, 4}, Labels: []uint8{0, 1}}
	}
	sum := func(im *Images) [32]byte {
		h := sha256.New()
		im.WriteDigest(h)
		return [32]byte(h.Sum(nil))
	}
	var old bytes.Buffer // what mirrored's dataDigest hashed before
	fmt.Fprintf(&old, "%d×%d×%d\n", 2, 1, 2)
	old.Write([]byte{1, 2, 3, 4})
	old.Write([]byte{0, 1})
	if got, want := sum(base()), sha256.Sum256(old.Bytes()); got != want {
		t.Fatal("a greyscale MNIST-normalised set's digest changed")
	}
	withOne := func(f func(im *Images)) *Images { im := base(); f(im); return im }
	same := []*Images{withOne(func(im *Images) { im.Channels = 1 }), withOne(func(im *Images) { im.Norm = MNISTNorm })}
	for i, im := range same {
		if sum(im) != sum(base()) {
			t.Errorf("same %d: an equivalent set has another digest", i)
		}
	}
	other := map[string]*Images{
		"x/255":    withOne(func(im *Images) { im.Norm = UnitNorm }),
		"channels": withOne(func(im *Images) { im.Cols, im.Channels = 1, 2 }),
		"floats":   withOne(func(im *Images) { im.Pixels, im.Floats = nil, []float32{1, 2, 3, 4} }),
		"a label":  withOne(func(im *Images) { im.Labels = []uint8{1, 1} }),
	}
	for name, im := range other {
		if sum(im) == sum(base()) {
			t.Errorf("%s: same digest as the base set", name)
		}
	}
}

// stored is the index, in a channel-last image of dim values and c
// channels, of the value at i in the planar row a batch holds.
func stored(i, dim, c int) int {
	plane := dim / c
	return (i%plane)*c + i/plane
}

// TestImagesOwnNormalization: rows are normalised by the set's own Normalization,
// bytes through the table and floats directly, the zero value as MNIST;
// images of several channels become planar (C×H×W) in the batch.
func TestImagesOwnNormalization(t *testing.T) {
	px := []uint8{0, 51, 255, 102}
	cases := []struct {
		name string
		im   *Images
		want func(i int) float32
	}{
		{"MNIST's (zero)", &Images{N: 1, Rows: 2, Cols: 2, Pixels: px, Labels: []uint8{3}},
			func(i int) float32 { return float32((float64(px[i])/255 - MNISTMean) / MNISTStd) }},
		{"x/255", &Images{N: 1, Rows: 2, Cols: 1, Channels: 2, Pixels: px, Labels: []uint8{3}, Norm: UnitNorm},
			func(i int) float32 { return float32(float64(px[stored(i, 4, 2)]) / 255) }},
		{"floats as stored", &Images{N: 1, Rows: 1, Cols: 2, Channels: 2, Floats: []float32{-1, 0.5, 2, 3}, Labels: []uint8{3}, Norm: NoNorm},
			func(i int) float32 { return []float32{-1, 0.5, 2, 3}[stored(i, 4, 2)] }},
		{"three channels planar", &Images{N: 1, Rows: 1, Cols: 2, Channels: 3, Floats: []float32{1, 2, 3, 4, 5, 6}, Labels: []uint8{3}, Norm: NoNorm},
			func(i int) float32 { return []float32{1, 4, 2, 5, 3, 6}[i] }},
		{"floats standardised", &Images{N: 1, Rows: 1, Cols: 4, Floats: []float32{-1, 0.5, 2, 3}, Labels: []uint8{3}, Norm: Normalization{Scale: 2, Mean: 1, Std: 4}},
			func(i int) float32 { return float32((float64([]float32{-1, 0.5, 2, 3}[i])/2 - 1) / 4) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := c.im.Dataset()
			var b Batch
			ds.Append(&b, 0)
			if d := c.im.Dim(); ds.Dim() != d || len(b.X) != d || b.Labels[0] != 3 {
				t.Fatalf("dim %d, row %v, label %v", ds.Dim(), b.X, b.Labels)
			}
			for i, v := range b.X {
				if v != c.want(i) {
					t.Errorf("value %d = %v, want %v", i, v, c.want(i))
				}
			}
		})
	}
}

func TestImagesHead(t *testing.T) {
	im := &Images{N: 3, Rows: 1, Cols: 1, Channels: 2, Floats: []float32{1, 2, 3, 4, 5, 6}, Labels: []uint8{0, 1, 2}, Norm: NoNorm}
	for _, c := range []struct{ n, want int }{{0, 3}, {2, 2}, {3, 3}, {9, 3}} {
		h := im.Head(c.n)
		if h.N != c.want || len(h.Floats) != 2*c.want || len(h.Labels) != c.want || h.Channels != 2 || h.Norm != NoNorm {
			t.Errorf("Head(%d) = %+v, want %d images with their shape and normalisation", c.n, h, c.want)
		}
	}
	if h := im.Head(1); !slices.Equal(h.Floats, []float32{1, 2}) {
		t.Errorf("Head(1) floats %v", h.Floats)
	}
}

func TestNormalization(t *testing.T) {
	cases := []struct {
		n    Normalization
		text string
		ok   bool
	}{
		{Normalization{}, "(x/255 - 0.1307)/0.3081", true},
		{UnitNorm, "x/255", true},
		{NoNorm, "x", true},
		{Normalization{Scale: 1, Mean: 0.5, Std: 2}, "(x - 0.5)/2", true},
		{Normalization{Scale: 255, Std: 0}, "x/255/0", false},
		{Normalization{Scale: -1, Std: 1}, "x/-1", false},
		{Normalization{Scale: 1, Mean: math.NaN(), Std: 1}, "(x - NaN)", false},
	}
	for _, c := range cases {
		if s := c.n.String(); !strings.HasPrefix(s, c.text) {
			t.Errorf("%#v: %q, want %q", c.n, s, c.text)
		}
		if err := c.n.Check(); (err == nil) != c.ok {
			t.Errorf("%#v: Check() = %v, want ok %t", c.n, err, c.ok)
		}
	}
}

// TestInputNorm: the one normalisation rule: the reader's, unless the
// model normalises its inputs itself (then as stored).
func TestInputNorm(t *testing.T) {
	cases := []struct {
		name       string
		norm       Normalization
		normalizes bool
		want       Normalization
	}{
		{"IDX, built-in model", Normalization{}, false, MNISTNorm},
		{"IDX, Rescaling first", Normalization{}, true, NoNorm},
		{"bytes", UnitNorm, false, UnitNorm},
		{"bytes, Normalization first", UnitNorm, true, NoNorm},
		{"floats", NoNorm, false, NoNorm},
		{"floats, Rescaling first", NoNorm, true, NoNorm},
	}
	for _, c := range cases {
		if got := InputNorm(&Images{Norm: c.norm}, c.normalizes); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
