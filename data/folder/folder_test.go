package folder

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"go.uber.org/zap/zaptest"
)

// writeImage writes an h×w image at path (PNG, or JPEG by extension):
// grey with value v, or, if rgb, the colour (v, 255-v, 7).
func writeImage(t testing.TB, path string, h, w int, v uint8, rgb bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var img image.Image
	if rgb {
		m := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				m.SetNRGBA(x, y, color.NRGBA{v, 255 - v, 7, 255})
			}
		}
		img = m
	} else {
		m := image.NewGray(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			m.Pix[i] = v
		}
		img = m
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if strings.HasSuffix(path, ".jpg") {
		err = jpeg.Encode(f, img, &jpeg.Options{Quality: 100})
	} else {
		err = png.Encode(f, img)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// makeFolder writes classes "cat" and "dog" of n images each (4×3, grey
// 10 and 200) under dir, some JPEG and one RGB among them.
func makeFolder(t testing.TB, dir string, n int) {
	for i := range n {
		ext := ".png"
		if i%3 == 1 {
			ext = ".jpg"
		}
		writeImage(t, filepath.Join(dir, "cat", "c"+string(rune('a'+i))+ext), 4, 3, 10, false)
		writeImage(t, filepath.Join(dir, "dog", "d"+string(rune('a'+i))+ext), 4, 3, 200, i == 0)
	}
}

func open(t *testing.T, dir string, ro data.ReadOptions) (*data.ImageSet, error) {
	return data.OpenImages(context.Background(), dir, data.ImageOptions{Read: ro, MNIST: data.MNISTOptions{Logger: zaptest.NewLogger(t)}})
}

// TestReadFolder: a folder of class folders is told from its contents,
// its classes are the sorted folder names, the validation split is the
// same for the same seed, colour mode and size are as asked, and a
// train/ test/ layout is taken as the splits.
func TestReadFolder(t *testing.T) {
	dir := t.TempDir()
	makeFolder(t, dir, 10)
	set, err := open(t, dir, data.ReadOptions{ValidationSplit: 0.3, SplitSeed: 1, ColorMode: data.ColorGrayscale})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != data.FormatImages || !slices.Equal(set.ClassNames, []string{"cat", "dog"}) || set.Classes != 2 {
		t.Fatalf("format %q, classes %v (%d)", set.Format, set.ClassNames, set.Classes)
	}
	if set.Train.N+set.Test.N != 20 || set.Test.N == 0 || set.Train.Rows != 4 || set.Train.Cols != 3 || set.Train.C() != 1 || set.Train.Norm != data.UnitNorm {
		t.Fatalf("train %d, test %d, %d×%d×%d %s", set.Train.N, set.Test.N, set.Train.Rows, set.Train.Cols, set.Train.C(), set.Train.Norm)
	}
	for i, l := range set.Train.Labels { // every pixel of a cat is 10, of a dog 200 (JPEG: within a little), of the RGB dog its luma 93
		want := []int{10, 200}[l]
		for _, p := range set.Train.Pixels[i*12 : (i+1)*12] {
			if d := int(p) - want; (d < -3 || d > 3) && !(l == 1 && p == 93) {
				t.Fatalf("image %d of class %d has pixel %d, want %d", i, l, p, want)
			}
		}
	}
	again, err := open(t, dir, data.ReadOptions{ValidationSplit: 0.3, SplitSeed: 1, ColorMode: data.ColorGrayscale})
	if err != nil || !slices.Equal(again.Test.Pixels, set.Test.Pixels) || !slices.Equal(again.Test.Labels, set.Test.Labels) {
		t.Fatalf("the same seed split otherwise: %v", err)
	}
	other, err := open(t, dir, data.ReadOptions{ValidationSplit: 0.3, SplitSeed: 2, ImageSize: [2]int{8, 6}})
	if err != nil {
		t.Fatal(err)
	}
	if other.Train.C() != 3 || other.Train.Rows != 8 || other.Train.Floats == nil || slices.Equal(other.Test.Labels, set.Test.Labels) && other.Test.N == set.Test.N {
		t.Errorf("rgb 8×6: %d channels, %d×%d, floats %t; test labels %v (seed 1: %v)", other.Train.C(), other.Train.Rows, other.Train.Cols, other.Train.Floats != nil, other.Test.Labels, set.Test.Labels)
	}

	// A class folder that is a symbolic link is read through it.
	linked := t.TempDir()
	makeFolder(t, filepath.Join(linked, "real"), 3)
	os.MkdirAll(filepath.Join(linked, "set"), 0o755)
	for _, c := range []string{"cat", "dog"} {
		if err := os.Symlink(filepath.Join(linked, "real", c), filepath.Join(linked, "set", c)); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := open(t, filepath.Join(linked, "set"), data.ReadOptions{ValidationSplit: 0.3, SplitSeed: 1})
	if err != nil || ls.Train.N+ls.Test.N != 6 || !slices.Equal(ls.ClassNames, []string{"cat", "dog"}) {
		t.Errorf("symlinked class folders: %v, %+v", err, ls)
	}

	split := t.TempDir()
	makeFolder(t, filepath.Join(split, "train"), 4)
	makeFolder(t, filepath.Join(split, "test"), 2)
	s2, err := open(t, split, data.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Train.N != 8 || s2.Test.N != 4 || s2.Train.C() != 3 {
		t.Errorf("train/test layout: %d and %d images of %d channels, want 8, 4, 3", s2.Train.N, s2.Test.N, s2.Train.C())
	}
}

// TestReadFolderShard: a peer decodes only its shard of the training
// images, which are the rows the whole set holds at its indices, and the
// peers agree on the set's digest.
func TestReadFolderShard(t *testing.T) {
	dir := t.TempDir()
	makeFolder(t, dir, 9)
	whole, err := open(t, dir, data.ReadOptions{ValidationSplit: 0.25, SplitSeed: 5})
	if err != nil {
		t.Fatal(err)
	}
	dim := whole.Train.Dim()
	var digests []string
	for r := range 3 {
		s, err := open(t, dir, data.ReadOptions{ValidationSplit: 0.25, SplitSeed: 5, Shard: data.Shard{Rank: r, World: 3}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Train.N != whole.Train.N || !slices.Equal(s.Train.Labels, whole.Train.Labels) || s.Test.N != whole.Test.N {
			t.Fatalf("rank %d: %d training images, want %d", r, s.Train.N, whole.Train.N)
		}
		k := 0
		for i := r; i < whole.Train.N; i += 3 {
			if !slices.Equal(s.Train.Pixels[k*dim:(k+1)*dim], whole.Train.Pixels[i*dim:(i+1)*dim]) {
				t.Fatalf("rank %d: held image %d is not image %d", r, k, i)
			}
			k++
		}
		if len(s.Train.Pixels) != k*dim {
			t.Fatalf("rank %d holds %d values, want %d", r, len(s.Train.Pixels), k*dim)
		}
		digests = append(digests, s.Train.Digest)
	}
	if digests[0] == "" || digests[0] != digests[1] || digests[1] != digests[2] {
		t.Errorf("the peers' digests differ: %q", digests)
	}
}

// TestReadFolderBad: every bad folder is an error naming the file or
// folder and what to do; --skip-corrupt skips a corrupt file.
func TestReadFolderBad(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		ro    data.ReadOptions
		want  string
	}{
		{"no test split", func(t *testing.T, dir string) { makeFolder(t, dir, 3) }, data.ReadOptions{}, "has no test split: give --validation-split"},
		{"empty class folder", func(t *testing.T, dir string) {
			makeFolder(t, dir, 3)
			os.MkdirAll(filepath.Join(dir, "emu"), 0o755)
			os.WriteFile(filepath.Join(dir, "emu", "notes.txt"), []byte("x"), 0o644)
		}, data.ReadOptions{ValidationSplit: 0.5}, "emu holds no image files"},
		{"corrupt image", func(t *testing.T, dir string) {
			makeFolder(t, dir, 3)
			os.WriteFile(filepath.Join(dir, "cat", "ca.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644)
		}, data.ReadOptions{ValidationSplit: 0.4, SplitSeed: 3}, "cat/ca.png: corrupt image"},
		{"truncated image", func(t *testing.T, dir string) {
			makeFolder(t, dir, 3)
			p := filepath.Join(dir, "dog", "dc.png")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, data.ReadOptions{ValidationSplit: 0.4, SplitSeed: 3}, "dog/dc.png: corrupt image"},
		{"sizes differ", func(t *testing.T, dir string) {
			makeFolder(t, dir, 3)
			writeImage(t, filepath.Join(dir, "dog", "dz.png"), 5, 5, 1, false)
		}, data.ReadOptions{ValidationSplit: 0.4, SplitSeed: 3}, "give --image-size HxW"},
		{"test class not in train", func(t *testing.T, dir string) {
			makeFolder(t, filepath.Join(dir, "train"), 2)
			makeFolder(t, filepath.Join(dir, "test"), 2)
			writeImage(t, filepath.Join(dir, "test", "emu", "e.png"), 4, 3, 1, false)
		}, data.ReadOptions{}, "is not among train/'s classes (cat, dog)"},
		{"train without test", func(t *testing.T, dir string) { makeFolder(t, filepath.Join(dir, "train"), 2) }, data.ReadOptions{}, "has train/ but no test/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			_, err := data.OpenImages(context.Background(), dir, data.ImageOptions{Format: data.FormatImages, Read: c.ro})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	t.Run("skip corrupt", func(t *testing.T) {
		dir := t.TempDir()
		makeFolder(t, dir, 3)
		os.WriteFile(filepath.Join(dir, "cat", "ca.png"), []byte("garbage"), 0o644)
		set, err := open(t, dir, data.ReadOptions{ValidationSplit: 0.4, SplitSeed: 3, SkipCorrupt: true, Shard: data.Shard{Rank: 1, World: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if set.Train.N+set.Test.N != 5 || set.Train.Shard.World > 1 {
			t.Errorf("%d+%d images (sharded %v), want the 5 that decode, all on every peer", set.Train.N, set.Test.N, set.Train.Shard)
		}
	})
	t.Run("FIFO", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skip(err)
		}
		_, err := data.OpenImages(context.Background(), p, data.ImageOptions{})
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("got %v, want an error naming %s", err, p)
		}
	})
}

// TestResizeBilinear checks the half-pixel-centre bilinear resize
// against values worked by hand from tf.image.resize's formula (a
// destination pixel i samples source (i+0.5)·in/out − 0.5, floored at 0).
func TestResizeBilinear(t *testing.T) {
	src := []float32{0, 10, 20, 30} // 1×4, one channel
	cases := []struct {
		ow   int
		want []float32
	}{
		{2, []float32{5, 25}}, // sources 0.5, 2.5
		// sources −0.25 (floored at 0), 0.25, 0.75 … 2.75, 3.25 (its
		// upper neighbour clamped to the edge, 3)
		{8, []float32{0, 2.5, 7.5, 12.5, 17.5, 22.5, 27.5, 30}},
		{4, []float32{0, 10, 20, 30}},
		{3, []float32{10.0 / 6, 15, 30 - 10.0/6}}, // sources 1/6, 3/2, 17/6
	}
	for _, c := range cases {
		got := ResizeBilinear(src, 1, 4, 1, 1, c.ow)
		if !slices.EqualFunc(got, c.want, func(a, b float32) bool { return a-b < 1e-5 && b-a < 1e-5 }) {
			t.Errorf("1×4 → 1×%d: %v, want %v", c.ow, got, c.want)
		}
	}
}

// TestResizeBilinearMatchesTF: a 3×4 image resized to 2×3 (shrinking)
// and 5×7 (growing) gives the values TensorFlow.js 4.22's
// tf.image.resizeBilinear(x, size, alignCorners=false,
// halfPixelCenters=true) gives, the kernel tf.image.resize runs (printed
// by node from /tmp/tfjs when this test was written; float32 there).
func TestResizeBilinearMatchesTF(t *testing.T) {
	src := []float32{0, 10, 20, 30, 5, 15, 25, 35, 50, 60, 70, 80}
	cases := []struct {
		oh, ow int
		want   []float32
	}{
		{2, 3, []float32{2.9166667461395264, 16.25, 29.58333396911621, 40.41666793823242, 53.75, 67.08333587646484}},
		{5, 7, []float32{0, 3.5714285373687744, 9.285714149475098, 15, 20.714284896850586, 26.428571701049805, 30,
			2, 5.5714287757873535, 11.285714149475098, 17, 22.714284896850586, 28.428571701049805, 32,
			5, 8.571428298950195, 14.285714149475098, 20, 25.714284896850586, 31.428571701049805, 35,
			32, 35.57143020629883, 41.28571319580078, 47, 52.71428680419922, 58.42856979370117, 62,
			50, 53.57143020629883, 59.28571319580078, 65, 70.71428680419922, 76.42857360839844, 80}},
	}
	for _, c := range cases {
		got := ResizeBilinear(src, 3, 4, 1, c.oh, c.ow)
		for i := range c.want {
			if d := got[i] - c.want[i]; d > 1e-4 || d < -1e-4 {
				t.Fatalf("3×4 → %d×%d: value %d is %v, TensorFlow's %v", c.oh, c.ow, i, got[i], c.want[i])
			}
		}
	}
}

// FuzzDecodeImage: no file makes the decoder panic or allocate past
// MaxImageSide a side; an accepted image converts to the values its
// size and channels say, each in 0..255.
func FuzzDecodeImage(f *testing.F) {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, 3, 2)))
	f.Add(buf.Bytes())
	buf.Reset()
	jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 4, 4)), nil)
	f.Add(buf.Bytes())
	f.Add([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
	f.Add([]byte("BM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := decodeImage(b)
		if err != nil {
			return
		}
		r := img.Bounds()
		for _, c := range []int{1, 3} {
			px := toChannels(img, c)
			if len(px) != r.Dx()*r.Dy()*c {
				t.Fatalf("%v image, %d channels: %d values", r, c, len(px))
			}
			for _, v := range px {
				if v < 0 || v > 255 {
					t.Fatalf("value %v", v)
				}
			}
		}
	})
}
