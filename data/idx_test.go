package data

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// tinyImages returns a deterministic uint8 image IDX file (n images of
// rows x cols) and its labels file, labels i%10.
func tinyImages(n, rows, cols int, salt byte) (img, lbl []byte) {
	pix := make([]byte, n*rows*cols)
	for i := range pix {
		pix[i] = byte(i*31) ^ salt
	}
	labels := make([]byte, n)
	for i := range labels {
		labels[i] = byte(i % 10)
	}
	return EncodeIDX(IDXUint8, []int{n, rows, cols}, pix), EncodeIDX(IDXUint8, []int{n}, labels)
}

// TestGoldenIDX parses the tiny golden files in testdata/ (regenerate with
// go test ./data -run TestGoldenIDX -rewrite) and checks their contents.
func TestGoldenIDX(t *testing.T) {
	img, lbl := tinyImages(3, 2, 4, 0x5a)
	golden := map[string][]byte{"tiny-images-idx3-ubyte": img, "tiny-labels-idx1-ubyte": lbl}
	for name, want := range golden {
		p := filepath.Join("testdata", name)
		if *rewrite {
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes; review and run with -rewrite", p)
		}
	}
	raw, _ := os.ReadFile(filepath.Join("testdata", "tiny-images-idx3-ubyte"))
	rawL, _ := os.ReadFile(filepath.Join("testdata", "tiny-labels-idx1-ubyte"))
	im, err := parseImages("tiny-images", raw, "tiny-labels", rawL, 10)
	if err != nil {
		t.Fatal(err)
	}
	if im.N != 3 || im.Rows != 2 || im.Cols != 4 || len(im.Pixels) != 24 || !bytes.Equal(im.Labels, []byte{0, 1, 2}) {
		t.Fatalf("parsed %d images of %dx%d, %d pixels, labels %v; want 3 of 2x4, 24 pixels, labels [0 1 2]", im.N, im.Rows, im.Cols, len(im.Pixels), im.Labels)
	}
	if im.Pixels[5] != byte(5*31)^0x5a {
		t.Fatalf("pixel 5 = %d, want %d", im.Pixels[5], byte(5*31)^0x5a)
	}
}

func TestParseIDXErrors(t *testing.T) {
	valid := EncodeIDX(IDXUint8, []int{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	cases := []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"empty", nil, "offset 0"},
		{"short magic", []byte{0, 0}, "offset 2"},
		{"bad magic", append([]byte{1}, valid[1:]...), "magic number"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0}, "still compressed"},
		{"unknown type", EncodeIDX(0x07, []int{1}, []byte{1}), "element type 0x07 at byte offset 2"},
		{"no dims", []byte{0, 0, 8, 0}, "dimension count 0 at byte offset 3"},
		{"too many dims", []byte{0, 0, 8, 9}, "dimension count 9"},
		{"short header", valid[:9], "truncated IDX header at byte offset 9"},
		{"zero dim", EncodeIDX(IDXUint8, []int{2, 0}, nil), "dimension 1 is zero at byte offset 8"},
		{"huge dims", EncodeIDX(IDXFloat64, []int{1 << 20, 1 << 20}, nil), "corrupt header"},
		{"truncated data", valid[:len(valid)-2], "file ends at byte offset 16"},
		{"trailing", append(append([]byte{}, valid...), 9, 9), "2 trailing bytes from byte offset 18"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseIDX("f.idx", c.in)
			if err == nil {
				t.Fatalf("ParseIDX succeeded, want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "f.idx: ") {
				t.Fatalf("error %q: want it to start with the file name and contain %q", err, c.want)
			}
		})
	}
	x, err := ParseIDX("f.idx", valid)
	if err != nil || len(x.Dims) != 2 || x.Dims[0] != 2 || x.Dims[1] != 3 || !bytes.Equal(x.Data, valid[12:]) {
		t.Fatalf("valid file: got %+v, %v", x, err)
	}
	f := EncodeIDX(IDXFloat32, []int{2}, []byte{0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0})
	x, err = ParseIDX("f.idx", f)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := x.Float32s(); err != nil || len(v) != 2 || v[0] != 1 || v[1] != -2 {
		t.Fatalf("Float32s = %v, %v; want [1 -2]", v, err)
	}
}

func TestImageChecks(t *testing.T) {
	img, lbl := tinyImages(3, 2, 2, 0)
	badLbl := append([]byte{}, lbl...)
	badLbl[len(badLbl)-1] = 10
	img1, lbl1 := tinyImages(4, 2, 2, 0)
	cases := []struct {
		name     string
		img, lbl []byte
		want     string
	}{
		{"label out of range", img, badLbl, "lbl: label 10 of example 2 at byte offset 10 is out of range 0..9"},
		{"count mismatch", img, lbl1, "img has 3 images but lbl has 4 labels"},
		{"images not 3-D", lbl, lbl, "img: want a 3-dimensional uint8"},
		{"labels not 1-D", img1, img1, "lbl: want a 1-dimensional uint8"},
		{"truncated images", img[:len(img)-1], lbl, "img: truncated: file ends at byte offset 27"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseImages("img", c.img, "lbl", c.lbl, 10)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// FuzzReadIDX checks ParseIDX never panics and, when it accepts an input,
// that the result describes the input exactly.
func FuzzReadIDX(f *testing.F) {
	img, lbl := tinyImages(3, 2, 4, 1)
	f.Add(img)
	f.Add(lbl)
	f.Add(EncodeIDX(IDXFloat32, []int{1, 2}, make([]byte, 8)))
	f.Add(EncodeIDX(IDXInt16, []int{3}, make([]byte, 6)))
	f.Add([]byte{0, 0, 8, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ParseIDX("fuzz", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		n := idxElemSize(x.Type)
		for _, d := range x.Dims {
			if d <= 0 {
				t.Fatalf("accepted dimension %d", d)
			}
			n *= d
		}
		if len(x.Data) != n || x.headerLen()+n != len(b) {
			t.Fatalf("accepted %d bytes with dims %v: data %d bytes, header %d", len(b), x.Dims, len(x.Data), x.headerLen())
		}
		if !bytes.Equal(EncodeIDX(x.Type, x.Dims, x.Data), b) {
			t.Fatal("re-encoding the parsed file does not give the input")
		}
	})
}
