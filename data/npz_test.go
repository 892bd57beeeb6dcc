package data

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/sbinet/npyio/npy"
	"codeberg.org/sbinet/npyio/npz"
)

// npyBytes is the .npy file npyio writes for v (nested slices give the
// shape).
func npyBytes(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := npy.Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawNPY is a version 1 .npy file with header dict hdr and data, for the
// inputs npyio will not write (object arrays, Fortran order, lies).
func rawNPY(hdr string, data []byte) []byte {
	h := hdr + strings.Repeat(" ", 15-(10+len(hdr))%16) + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

// zipOf returns a .npz archive of the named members.
func zipOf(t testing.TB, members map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// images3 is n uint8 images of h×w, pixel values from i.
func images3(n, h, w int) [][][]uint8 {
	out := make([][][]uint8, n)
	for i := range out {
		out[i] = make([][]uint8, h)
		for r := range out[i] {
			out[i][r] = make([]uint8, w)
			for c := range out[i][r] {
				out[i][r][c] = uint8(i*7 + r*3 + c)
			}
		}
	}
	return out
}

// goodMembers is a valid Keras-layout set: 4 training and 2 test 3×2
// images, 3 classes.
func goodMembers(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"x_train.npy": npyBytes(t, images3(4, 3, 2)),
		"y_train.npy": npyBytes(t, []int64{0, 1, 2, 1}),
		"x_test.npy":  npyBytes(t, images3(2, 3, 2)),
		"y_test.npy":  npyBytes(t, []uint8{2, 0}),
	}
}

func with(m map[string][]byte, name string, b []byte) map[string][]byte {
	m = maps(m)
	if b == nil {
		delete(m, name)
	} else {
		m[name] = b
	}
	return m
}

func maps(m map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestReadNPZ(t *testing.T) {
	good := goodMembers(t)
	fl := [][][][]float32{{{{0.5, -1}}}, {{{2, 3}}}}
	cases := []struct {
		name    string
		members map[string][]byte
		check   func(t *testing.T, s *ImageSet)
	}{
		{"uint8 N×H×W, int64 and uint8 labels", good, func(t *testing.T, s *ImageSet) {
			if s.Train.N != 4 || s.Test.N != 2 || s.Train.Rows != 3 || s.Train.Cols != 2 || s.Train.C() != 1 || s.Classes != 3 {
				t.Errorf("got train %d test %d of %d×%d×%d, %d classes; want 4, 2 of 3×2×1, 3", s.Train.N, s.Test.N, s.Train.Rows, s.Train.Cols, s.Train.C(), s.Classes)
			}
			if !slices.Equal(s.Train.Labels, []uint8{0, 1, 2, 1}) || s.Train.Pixels[7] != 7+1 || s.Train.Norm != UnitNorm {
				t.Errorf("labels %v, pixel 7 %d, norm %s: want [0 1 2 1], 8, x/255", s.Train.Labels, s.Train.Pixels[7], s.Train.Norm)
			}
		}},
		{"float32 N×H×W×C, N×1 int32 labels", map[string][]byte{
			"x_train.npy": npyBytes(t, fl), "y_train.npy": npyBytes(t, [][]int32{{0}, {1}}),
			"x_test.npy": npyBytes(t, fl), "y_test.npy": npyBytes(t, [][]int32{{1}, {0}}),
		}, func(t *testing.T, s *ImageSet) {
			if s.Train.C() != 2 || s.Train.Dim() != 2 || !slices.Equal(s.Train.Floats, []float32{0.5, -1, 2, 3}) || s.Train.Norm != NoNorm || s.Train.Pixels != nil {
				t.Errorf("got %d channels, floats %v, norm %s", s.Train.C(), s.Train.Floats, s.Train.Norm)
			}
		}},
		{"big-endian labels and pixels", map[string][]byte{
			"x_train.npy": rawNPY("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 1, 1), }", []byte{0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}),
			"y_train.npy": rawNPY("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", []byte{0, 2, 0, 0}),
			"x_test.npy":  rawNPY("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1, 1), }", []byte{0x40, 0, 0, 0}),
			"y_test.npy":  rawNPY("{'descr': '>u8', 'fortran_order': False, 'shape': (1,), }", []byte{0, 0, 0, 0, 0, 0, 0, 1}),
		}, func(t *testing.T, s *ImageSet) {
			if !slices.Equal(s.Train.Floats, []float32{1, -2}) || !slices.Equal(s.Train.Labels, []uint8{2, 0}) || !slices.Equal(s.Test.Floats, []float32{2}) || !slices.Equal(s.Test.Labels, []uint8{1}) || s.Classes != 3 {
				t.Errorf("got train %v %v, test %v %v, %d classes", s.Train.Floats, s.Train.Labels, s.Test.Floats, s.Test.Labels, s.Classes)
			}
		}},
		{"extra arrays ignored", with(good, "mean.npy", npyBytes(t, []float32{1})), func(t *testing.T, s *ImageSet) {
			if s.Train.N != 4 {
				t.Errorf("train %d, want 4", s.Train.N)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := zipOf(t, c.members)
			s, err := readNPZ("set.npz", bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, s)
		})
	}
}

// TestReadNPZBad: every bad input is an error that says what is wrong.
func TestReadNPZBad(t *testing.T) {
	good := goodMembers(t)
	u8 := func(v ...uint8) []byte { return v }
	cases := []struct {
		name    string
		members map[string][]byte
		raw     []byte // instead of members
		want    string
	}{
		{"missing key names the keys found", with(good, "x_test.npy", nil), nil, "has no array x_test: it holds arrays x_train, y_test, y_train"},
		{"other names", map[string][]byte{"images.npy": good["x_train.npy"], "labels.npy": good["y_train.npy"]}, nil, "it holds arrays images, labels; want Keras's layout x_train, y_train, x_test, y_test"},
		{"x/y count mismatch", with(good, "y_train.npy", npyBytes(t, []int64{0, 1, 2})), nil, "x_train.npy holds 4 images but set.npz:y_train.npy 3 labels"},
		{"train/test shape mismatch", with(good, "x_test.npy", npyBytes(t, images3(2, 2, 3))), nil, "x_train holds [3 2] |u1 images but x_test [2 3] |u1"},
		{"train/test type mismatch", with(good, "x_test.npy", npyBytes(t, [][][]float32{{{0, 0}, {0, 0}, {0, 0}}, {{0, 0}, {0, 0}, {0, 0}}})), nil, "must have one shape and type"},
		{"label out of range", with(good, "y_train.npy", npyBytes(t, []int64{0, 1, 256, 1})), nil, "label 256 of example 2 is out of range 0..255"},
		{"negative label", with(good, "y_test.npy", npyBytes(t, []int8{-1, 0})), nil, "label -1 of example 0 is out of range"},
		{"one class", map[string][]byte{
			"x_train.npy": good["x_train.npy"], "y_train.npy": npyBytes(t, []int64{0, 0, 0, 0}),
			"x_test.npy": good["x_test.npy"], "y_test.npy": npyBytes(t, []int64{0, 0})}, nil, "only label 0"},
		{"float labels", with(good, "y_test.npy", npyBytes(t, []float32{1, 0})), nil, "want integer labels"},
		{"labels N×2", with(good, "y_test.npy", npyBytes(t, [][]int64{{1, 0}, {0, 1}})), nil, "want integer labels, N or N×1"},
		{"integer images", with(good, "x_test.npy", npyBytes(t, [][][]int32{{{1}}})), nil, "want uint8 or float32 images"},
		{"float64 images", with(good, "x_test.npy", npyBytes(t, [][][]float64{{{1}}})), nil, "dtype '<f8': want uint8 or float32 images"},
		{"1-D images", with(good, "x_test.npy", npyBytes(t, []uint8{1, 2})), nil, "want images N×H×W or N×H×W×C, or rows N×L"},
		{"3-D integer images", with(good, "x_test.npy", npyBytes(t, [][][]int64{{{1}}, {{2}}})), nil, "integers only as N×L token sequences"},
		{"NaN pixel", map[string][]byte{
			"x_train.npy": npyBytes(t, [][][]float32{{{0}}, {{float32(math.NaN())}}}), "y_train.npy": npyBytes(t, []int64{0, 1}),
			"x_test.npy": npyBytes(t, [][][]float32{{{0}}}), "y_test.npy": npyBytes(t, []int64{1})}, nil, "value NaN at flat index 1 (image 1): want finite pixels"},
		{"no images", map[string][]byte{
			"x_train.npy": rawNPY("{'descr': '|u1', 'fortran_order': False, 'shape': (0, 3, 2), }", nil), "y_train.npy": rawNPY("{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }", nil),
			"x_test.npy": good["x_test.npy"], "y_test.npy": good["y_test.npy"]}, nil, "want at least one image"},
		{"pickled object array", with(good, "y_train.npy", rawNPY("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }", make([]byte, 32))), nil, "pickled object array: refused, as numpy.load(allow_pickle=False)"},
		{"structured array", with(good, "y_train.npy", rawNPY("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (4,), }", make([]byte, 16))), nil, "want a plain dtype"},
		{"fortran order", with(good, "x_train.npy", rawNPY("{'descr': '|u1', 'fortran_order': True, 'shape': (4, 3, 2), }", make([]byte, 24))), nil, "Fortran-ordered"},
		{"truncated data", with(good, "x_train.npy", good["x_train.npy"][:len(good["x_train.npy"])-1]), nil, "23 bytes of data after the header at byte offset 86, but shape [4 3 2] of |u1 needs 24: truncated"},
		{"trailing data", with(good, "y_test.npy", append(slices.Clone(good["y_test.npy"]), 0)), nil, "3 bytes of data"},
		{"negative dimension", with(good, "x_train.npy", rawNPY("{'descr': '|u1', 'fortran_order': False, 'shape': (-4, 3, 2), }", nil)), nil, "want non-negative dimensions"},
		{"uint64 label beyond int64", with(good, "y_test.npy", rawNPY("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", []byte{0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})), nil, "label 9223372036854775807 of example 0 is out of range"},
		{"huge shape", with(good, "x_train.npy", rawNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 100000), }", nil)), nil, "at most 1073741824 bytes"},
		{"not npy", with(good, "x_train.npy", u8(1, 2, 3)), nil, "x_train.npy: not a .npy array"},
		{"header length beyond the file", with(good, "x_train.npy", []byte("\x93NUMPY\x01\x00\xff\x00{")), nil, "header of 255 bytes at byte offset 10"},
		{"version 9", with(good, "x_train.npy", []byte("\x93NUMPY\x09\x00\x10\x00{}")), nil, ".npy format version 9.0"},
		{"header keys out of order", with(good, "y_test.npy", rawNPY("{'shape': (2,), 'fortran_order': False, 'descr': '|u1', }", u8(1, 0))), nil, "malformed .npy header"},
		{"not a zip", nil, []byte("PK\x03\x04 not really"), "not a .npz (zip) archive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.raw
			if b == nil {
				b = zipOf(t, c.members)
			}
			_, err := readNPZ("set.npz", bytes.NewReader(b), int64(len(b)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v\nwant one containing %q", err, c.want)
			}
		})
	}
}

// TestOpenImages: the one opener tells the format from the path and
// contents, or takes it as given, and reads a .npz, a directory of .npy
// files and a directory of IDX files to the same images.
func TestOpenImages(t *testing.T) {
	dir := t.TempDir()
	want := &ImageSet{Train: &Images{N: 3, Rows: 2, Cols: 2, Channels: 1, Pixels: []uint8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Labels: []uint8{0, 1, 2}},
		Test: &Images{N: 1, Rows: 2, Cols: 2, Channels: 1, Pixels: []uint8{9, 8, 7, 255}, Labels: []uint8{1}}}
	npzPath := filepath.Join(dir, "set.npz")
	if err := WriteNPZ(npzPath, want); err != nil {
		t.Fatal(err)
	}
	npyDir := filepath.Join(dir, "npy")
	os.Mkdir(npyDir, 0o755)
	for k, b := range map[string][]byte{"x_train": npyBytes(t, nest(want.Train, want.Train.Pixels)), "y_train": npyBytes(t, want.Train.Labels),
		"x_test": npyBytes(t, nest(want.Test, want.Test.Pixels)), "y_test": npyBytes(t, want.Test.Labels)} {
		os.WriteFile(filepath.Join(npyDir, k+".npy"), b, 0o644)
	}
	idxDir := filepath.Join(dir, "idx")
	os.Mkdir(idxDir, 0o755)
	if err := WriteMNIST(idxDir, want, false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, format, wantFormat string
		norm                     Normalization
	}{
		{npzPath, "", FormatNPZ, UnitNorm},
		{npzPath, FormatNPZ, FormatNPZ, UnitNorm},
		{npyDir, "", FormatNPY, UnitNorm},
		{idxDir, "", FormatMNIST, Normalization{}},
		{idxDir, FormatMNIST, FormatMNIST, Normalization{}},
	}
	for _, c := range cases {
		t.Run(c.wantFormat+"/"+c.format, func(t *testing.T) {
			s, err := OpenImages(testCtx(t), c.path, ImageOptions{Format: c.format, MNIST: MNISTOptions{AllowUnverified: true}})
			if err != nil {
				t.Fatal(err)
			}
			if s.Format != c.wantFormat || s.Dir != c.path || s.Classes != 3 {
				t.Errorf("format %q dir %q classes %d; want %q, %q, 3", s.Format, s.Dir, s.Classes, c.wantFormat, c.path)
			}
			for i, im := range []*Images{s.Train, s.Test} {
				w := []*Images{want.Train, want.Test}[i]
				if im.N != w.N || im.Rows != w.Rows || im.Cols != w.Cols || im.C() != 1 || !bytes.Equal(im.Pixels, w.Pixels) || !bytes.Equal(im.Labels, w.Labels) || im.Norm != c.norm {
					t.Errorf("set %d: got %+v, want %+v with norm %v", i, im, w, c.norm)
				}
			}
		})
	}

	bad := []struct{ name, path, format, want string }{
		{"unknown format", npzPath, "hdf5", `image format "hdf5": want one of mnist, npz, npy`},
		{"wrong format given", npzPath, FormatNPY, "has no array x_train: it holds no arrays"},
		{"format without path", "", FormatNPZ, "image format npz needs a path"},
		{"missing", filepath.Join(dir, "nope.npz"), "", "no such file"},
		{"empty directory", t.TempDir(), "", "is not an image data set meshtrain reads: want a directory of MNIST's four IDX files, or a NumPy .npz"},
		{"one npy file", filepath.Join(npyDir, "x_train.npy"), "", "is a single .npy array"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenImages(testCtx(t), c.path, ImageOptions{Format: c.format})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestOpenImagesFIFO: a FIFO given as the set, or as one of its arrays,
// is refused at once (no writer ever comes), under any format.
func TestOpenImagesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "set.npz")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	npyDir := filepath.Join(dir, "npy")
	os.Mkdir(npyDir, 0o755)
	for k, b := range goodMembers(t) {
		os.WriteFile(filepath.Join(npyDir, k), b, 0o644)
	}
	os.Remove(filepath.Join(npyDir, "x_test.npy"))
	if err := syscall.Mkfifo(filepath.Join(npyDir, "x_test.npy"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, format string }{{fifo, ""}, {fifo, FormatNPZ}, {npyDir, ""}, {npyDir, FormatNPY}} {
		t.Run(filepath.Base(c.path)+"/"+c.format, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := OpenImages(ctx, c.path, ImageOptions{Format: c.format})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "x_test.npy") && !strings.Contains(err.Error(), "set.npz") || !strings.Contains(err.Error(), "not a regular file") && !strings.Contains(err.Error(), "FIFO") {
					t.Fatalf("got %v, want a refusal naming the FIFO", err)
				}
			case <-ctx.Done():
				t.Fatal("OpenImages blocked on a FIFO")
			}
		})
	}
}

// TestNPZRoundTrip: WriteNPZ then ReadNPZ gives the set back, bytes and
// floats, greyscale and colour.
func TestNPZRoundTrip(t *testing.T) {
	cases := []*ImageSet{
		{Train: &Images{N: 2, Rows: 1, Cols: 3, Channels: 1, Pixels: []uint8{1, 2, 3, 4, 5, 6}, Labels: []uint8{0, 4}, Norm: UnitNorm},
			Test: &Images{N: 1, Rows: 1, Cols: 3, Channels: 1, Pixels: []uint8{7, 8, 9}, Labels: []uint8{3}, Norm: UnitNorm}},
		{Train: &Images{N: 2, Rows: 2, Cols: 1, Channels: 3, Floats: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Labels: []uint8{0, 1}, Norm: NoNorm},
			Test: &Images{N: 1, Rows: 2, Cols: 1, Channels: 3, Floats: []float32{-1, -2, -3, -4, -5, -6}, Labels: []uint8{1}, Norm: NoNorm}},
	}
	for i, want := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.npz")
			if err := WriteNPZ(p, want); err != nil {
				t.Fatal(err)
			}
			got, err := ReadNPZ(p)
			if err != nil {
				t.Fatal(err)
			}
			// npyio, another reader, reads the same arrays.
			r, err := npz.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var labels []uint8
			if err := r.Read("y_train.npy", &labels); err != nil || !bytes.Equal(labels, want.Train.Labels) {
				t.Errorf("npyio reads y_train as %v (%v), want %v", labels, err, want.Train.Labels)
			}
			if want.Train.Floats != nil {
				var x []float32
				if err := r.Read("x_train.npy", &x); err != nil || !slices.Equal(x, want.Train.Floats) {
					t.Errorf("npyio reads x_train as %v (%v)", x, err)
				}
			} else {
				var x []uint8
				if err := r.Read("x_train.npy", &x); err != nil || !bytes.Equal(x, want.Train.Pixels) {
					t.Errorf("npyio reads x_train as %v (%v)", x, err)
				}
			}
			for j, im := range []*Images{got.Train, got.Test} {
				w := []*Images{want.Train, want.Test}[j]
				if im.N != w.N || im.Rows != w.Rows || im.Cols != w.Cols || im.C() != w.C() || !bytes.Equal(im.Pixels, w.Pixels) ||
					!slices.Equal(im.Floats, w.Floats) || !bytes.Equal(im.Labels, w.Labels) || im.Norm != w.Norm {
					t.Errorf("set %d: got %+v, want %+v", j, im, w)
				}
			}
		})
	}
}

// FuzzReadNPZ: no archive makes the npz reader panic, hang or allocate
// beyond its bounds; what it accepts keeps ImageSet's invariants. Run it
// with -fuzzminimizetime 200x: minimising a zip is slow, and under the
// default (60 s) a short run spends its whole time minimising one input.
func FuzzReadNPZ(f *testing.F) {
	good := goodMembers(f)
	f.Add(zipOf(f, good))
	f.Add(zipOf(f, with(good, "y_train.npy", rawNPY("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }", make([]byte, 32)))))
	f.Add(zipOf(f, with(good, "x_test.npy", rawNPY("{'shape': (2,), 'fortran_order': False, 'descr': '|u1', }", nil))))
	f.Add(good["x_train.npy"])
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := readNPZ("fuzz.npz", bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, im := range []*Images{s.Train, s.Test} {
			n := len(im.Pixels) + len(im.Floats)
			if n != im.N*im.Dim() || len(im.Labels) != im.N || im.Rows != s.Train.Rows || im.Cols != s.Train.Cols || im.C() != s.Train.C() {
				t.Fatalf("accepted an inconsistent set: %+v", im)
			}
			for _, l := range im.Labels {
				if int(l) >= s.Classes {
					t.Fatalf("label %d with %d classes", l, s.Classes)
				}
			}
		}
	})
}

// FuzzParseNPY: no .npy file makes the parser panic; an accepted one's
// elements fill its shape.
func FuzzParseNPY(f *testing.F) {
	f.Add(npyBytes(f, images3(2, 2, 2)))
	f.Add(npyBytes(f, []float32{1, 2}))
	f.Add(rawNPY("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8)))
	f.Add(rawNPY("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8)))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseNPY("fuzz.npy", b)
		if err != nil {
			return
		}
		n := 1
		for _, d := range a.shape {
			n *= d
		}
		if len(a.u8)+len(a.f32) != n && len(a.ints) != n {
			t.Fatalf("shape %v but %d/%d/%d elements", a.shape, len(a.u8), len(a.f32), len(a.ints))
		}
	})
}

// nest views flat pixels as the nested slices npyio writes with their
// shape: N×H×W, or N×H×W×C for more than one channel.
func nest[T uint8 | float32](im *Images, flat []T) any {
	c := im.C()
	rows := func(img []T) [][]T {
		out := make([][]T, im.Rows)
		for r := range out {
			out[r] = img[r*im.Cols : (r+1)*im.Cols]
		}
		return out
	}
	if c == 1 {
		out := make([][][]T, im.N)
		for n := range out {
			out[n] = rows(flat[n*im.Rows*im.Cols : (n+1)*im.Rows*im.Cols])
		}
		return out
	}
	out := make([][][][]T, im.N)
	d := im.Dim()
	for n := range out {
		out[n] = make([][][]T, im.Rows)
		for r := range out[n] {
			out[n][r] = make([][]T, im.Cols)
			for col := range out[n][r] {
				o := n*d + (r*im.Cols+col)*c
				out[n][r][col] = flat[o : o+c]
			}
		}
	}
	return out
}
