package data

import (
	"archive/zip"
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// zipWith is a .npz of members, each stored or deflated.
func zipWith(t testing.TB, members map[string][]byte, method uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: method})
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

// shardMembers is a Keras-layout set of 11 training images 3×2×2
// (colour), as float32 (big-endian, to read by hand) or uint8.
func shardMembers(t testing.TB, floats bool) map[string][]byte {
	x := rawNPY("{'descr': '|u1', 'fortran_order': False, 'shape': (11, 3, 2, 2), }", nil)
	data := make([]byte, 11*12)
	if floats {
		x = rawNPY("{'descr': '>f4', 'fortran_order': False, 'shape': (11, 3, 2, 2), }", nil)
		data = make([]byte, 11*12*4)
		for i := 0; i < 11*12; i++ {
			// float32 i/8 big-endian: exact
			b := float32bits(float32(i) / 8)
			data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(b>>24), byte(b>>16), byte(b>>8), byte(b)
		}
	} else {
		for i := range data {
			data[i] = byte(i)
		}
	}
	labels := make([]int64, 11)
	for i := range labels {
		labels[i] = int64(i % 3)
	}
	return map[string][]byte{
		"x_train.npy": append(x, data...), "y_train.npy": npyBytes(t, labels),
		"x_test.npy": npyBytes(t, [][][][]uint8{{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}}}), "y_test.npy": npyBytes(t, []int64{2}),
	}
}

// TestShardedNPZ: a peer of a sharded read holds exactly the training
// rows i ≡ rank (mod world) of the whole set, read by offset from a
// stored .npz or a .npy file and streamed from a deflated .npz; its
// batches are the whole set's batches at those indices; every peer
// records one digest of the file.
func TestShardedNPZ(t *testing.T) {
	for _, floats := range []bool{false, true} {
		members := shardMembers(t, floats)
		if floats {
			members["x_test.npy"] = npyBytes(t, [][][][]float32{{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}}})
		}
		dir := t.TempDir()
		for name, b := range members {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		readers := map[string]func(s Shard) (*ImageSet, error){
			"stored npz": func(s Shard) (*ImageSet, error) {
				b := zipWith(t, members, zip.Store)
				return readNPZShard("s.npz", bytes.NewReader(b), int64(len(b)), s)
			},
			"deflated npz": func(s Shard) (*ImageSet, error) {
				b := zipWith(t, members, zip.Deflate)
				return readNPZShard("d.npz", bytes.NewReader(b), int64(len(b)), s)
			},
			"npy folder": func(s Shard) (*ImageSet, error) { return readNPYDir(dir, ReadOptions{Shard: s}) },
		}
		for name, read := range readers {
			whole, err := read(Shard{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ds := whole.Train.Dataset()
			var digests []string
			for r := range 4 {
				set, err := read(Shard{Rank: r, World: 4})
				if err != nil {
					t.Fatalf("%s rank %d: %v", name, r, err)
				}
				im := set.Train
				if im.N != 11 || !slices.Equal(im.Labels, whole.Train.Labels) || im.C() != 2 || set.Test.N != 1 {
					t.Fatalf("%s rank %d: %d images of %d channels", name, r, im.N, im.C())
				}
				if held := len(im.Pixels) + len(im.Floats); held != ShardSize(11, 4, r)*12 {
					t.Fatalf("%s rank %d holds %d values, want %d", name, r, held, ShardSize(11, 4, r)*12)
				}
				sds := im.Dataset()
				for i := r; i < 11; i += 4 {
					var a, b Batch
					ds.Append(&a, i)
					sds.Append(&b, i)
					if !slices.Equal(a.X, b.X) || a.Labels[0] != b.Labels[0] {
						t.Fatalf("%s rank %d: example %d is %v, the whole set's %v", name, r, i, b.X, a.X)
					}
				}
				digests = append(digests, im.Digest)
			}
			if digests[0] == "" || len(slices.Compact(slices.Clone(digests))) != 1 {
				t.Errorf("%s: the peers' digests %q", name, digests)
			}
		}
	}
}

func float32bits(f float32) uint32 { return math.Float32bits(f) }

// TestNPZRows: N×L arrays are rows: token ids and float features used
// as stored, bytes scaled as pixels; ids beyond 2^24 refused.
func TestNPZRows(t *testing.T) {
	good := func(x []byte) map[string][]byte {
		return map[string][]byte{"x_train.npy": x, "y_train.npy": npyBytes(t, []int64{0, 1}),
			"x_test.npy": x, "y_test.npy": npyBytes(t, []int64{1, 0})}
	}
	cases := []struct {
		name string
		x    []byte
		norm Normalization
		want []float32
		err  string
	}{
		{"token ids", npyBytes(t, [][]int32{{5, 0, 9}, {1, 2, 3}}), NoNorm, []float32{5, 0, 9}, ""},
		{"int64 ids", npyBytes(t, [][]int64{{5, 0, 9}, {1, 2, 3}}), NoNorm, []float32{5, 0, 9}, ""},
		{"features", npyBytes(t, [][]float32{{0.5, -1, 2}, {1, 2, 3}}), NoNorm, []float32{0.5, -1, 2}, ""},
		{"flattened pixels", npyBytes(t, [][]uint8{{0, 255, 51}, {1, 2, 3}}), UnitNorm, []float32{0, 1, 0.2}, ""},
		{"id too large", npyBytes(t, [][]int64{{1 << 25, 0, 0}, {1, 2, 3}}), NoNorm, nil, "must be within ±2^24"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := zipOf(t, good(c.x))
			set, err := readNPZ("r.npz", bytes.NewReader(b), int64(len(b)))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			im := set.Train
			if im.Rows != 1 || im.Cols != 3 || im.Norm != c.norm {
				t.Fatalf("%d×%d, %s", im.Rows, im.Cols, im.Norm)
			}
			var batch Batch
			im.Dataset().Append(&batch, 0)
			if !slices.Equal(batch.X, c.want) {
				t.Errorf("row 0 is %v, want %v", batch.X, c.want)
			}
		})
	}
}

// TestOpenImagesBadData: each bad --data is an error naming the file and
// what to do, before any work.
func TestOpenImagesBadData(t *testing.T) {
	dir := t.TempDir()
	good := goodMembers(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, path string
		opts       ImageOptions
		want       string
	}{
		{"missing key", write("m.npz", zipOf(t, with(good, "y_test.npy", nil))), ImageOptions{}, "m.npz has no array y_test: it holds arrays x_test, x_train, y_train"},
		{"x/y disagree", write("xy.npz", zipOf(t, with(good, "y_train.npy", npyBytes(t, []int64{0, 1})))), ImageOptions{}, "xy.npz:y_train.npy 2 labels: want one label per image"},
		{"train/test disagree", write("tt.npz", zipOf(t, with(good, "x_test.npy", npyBytes(t, images3(2, 2, 3))))), ImageOptions{}, "the training and test images must have one shape and type"},
		{"label outside classes", write("l.npz", zipOf(t, with(good, "y_train.npy", npyBytes(t, []int64{0, 1, 999, 1})))), ImageOptions{}, "label 999 of example 2 is out of range 0..255"},
		{"unknown format", write("x.bin", []byte("hello")), ImageOptions{}, "x.bin is not an image data set meshtrain reads"},
		{"bad format name", write("y.npz", zipOf(t, good)), ImageOptions{Format: "parquet"}, `image format "parquet": want one of`},
		{"bad image size", write("z.npz", zipOf(t, good)), ImageOptions{Read: ReadOptions{ImageSize: [2]int{0, 3}}}, "want both sides from 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenImages(context.Background(), c.path, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// FuzzReadNPYHead: no header read from a stream makes the reader panic
// or allocate beyond the limit; an accepted one's data fill the size.
func FuzzReadNPYHead(f *testing.F) {
	f.Add(npyBytes(f, images3(2, 2, 2)), int64(0))
	f.Add(rawNPY("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }", make([]byte, 24)), int64(0))
	f.Add(rawNPY("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8)), int64(3))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{}"), int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, extra int64) {
		size := int64(len(b)) + extra%64
		h, err := readNPYHead("fuzz.npy", bytes.NewReader(b), size, maxNPYBytes)
		if err != nil {
			return
		}
		if int64(h.offset)+int64(h.n*h.dt.size) != size {
			t.Fatalf("header at %d, %d elements of %d bytes, in %d bytes", h.offset, h.n, h.dt.size, size)
		}
		rr := rowReader{at: bytes.NewReader(b), base: int64(h.offset)}
		if len(h.a.shape) > 0 && h.a.shape[0] > 0 && int64(len(b)) == size {
			if err := readRows(h, &rr, Shard{Rank: 1, World: 2}); err != nil && h.a.kind != 'i' {
				t.Fatalf("rows of an accepted header: %v", err)
			}
		}
	})
}
