package data

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"codeberg.org/sbinet/npyio/npy"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// kerasKeys are the arrays of Keras's image data sets, in the order
// train images, train labels, test images, test labels: the names
// np.savez gives them in keras.datasets' mnist.npz.
var kerasKeys = [4]string{"x_train", "y_train", "x_test", "y_test"}

const (
	// maxNPYBytes bounds one array (decompressed), as maxIDXFileBytes
	// bounds an IDX file: a corrupt size is an error, not an OOM.
	maxNPYBytes = 1 << 30
	// maxNPYHeader bounds the header's length field; numpy itself refuses
	// headers over 10,000 bytes unless told otherwise.
	maxNPYHeader = 1 << 16
	// maxLabel is the largest class id an Images can hold (its labels are
	// bytes).
	maxLabel = math.MaxUint8
)

// npyMagic starts every .npy file.
var npyMagic = []byte("\x93NUMPY")

// npyDtype is an element type the image readers accept, as a .npy
// header's descr names it.
type npyDtype struct {
	size int
	// kind: 'u' bytes (pixels or labels), 'f' float32 (pixels), 'i' any
	// other integer (labels).
	kind byte
	// ints decodes n elements with npyio into int64s; set for kind 'i'.
	ints func(r *npy.Reader, n int) ([]int64, error)
}

// readInts decodes n integers of type T with npyio and widens them; a
// uint64 beyond int64 becomes MaxInt64, which no label range admits.
func readInts[T int8 | int16 | int32 | int64 | uint16 | uint32 | uint64](r *npy.Reader, n int) ([]int64, error) {
	v := make([]T, n)
	if err := r.Read(&v); err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i, x := range v {
		if x > 0 && uint64(x) > math.MaxInt64 {
			out[i] = math.MaxInt64
			continue
		}
		out[i] = int64(x)
	}
	return out, nil
}

// npyDtypes lists the descrs read, as numpy writes them: one-byte types
// with "|", wider ones little- ("<") or big-endian (">"). Anything else
// (float64 pixels, strings, structured or object arrays) is refused.
var npyDtypes = map[string]npyDtype{
	"|u1": {1, 'u', nil}, "|i1": {1, 'i', readInts[int8]},
	"<i2": {2, 'i', readInts[int16]}, ">i2": {2, 'i', readInts[int16]},
	"<u2": {2, 'i', readInts[uint16]}, ">u2": {2, 'i', readInts[uint16]},
	"<i4": {4, 'i', readInts[int32]}, ">i4": {4, 'i', readInts[int32]},
	"<u4": {4, 'i', readInts[uint32]}, ">u4": {4, 'i', readInts[uint32]},
	"<i8": {8, 'i', readInts[int64]}, ">i8": {8, 'i', readInts[int64]},
	"<u8": {8, 'i', readInts[uint64]}, ">u8": {8, 'i', readInts[uint64]},
	"<f4": {4, 'f', nil}, ">f4": {4, 'f', nil},
}

// npyArray is one decoded array: bytes (kind 'u': u8), float32s ('f':
// f32) or integers ('i': ints; u8 arrays also fill ints, for labels).
type npyArray struct {
	name  string
	dtype string
	kind  byte
	shape []int
	u8    []uint8
	f32   []float32
	ints  []int64
}

// parseNPY decodes one .npy file held in b. name is used in errors. The
// framing (magic, version, header length, data length) is checked here
// before npyio parses the header and decodes the data, so a corrupt file
// is an error that names it rather than a huge allocation; pickled
// (object) arrays are refused as numpy.load(allow_pickle=False) does.
func parseNPY(name string, b []byte) (*npyArray, error) {
	h, err := parseNPYHeader(name, b, int64(len(b)), maxNPYBytes)
	if err != nil {
		return nil, err
	}
	if err := h.a.decode(h.r, h.dt, h.n); err != nil {
		return nil, fmt.Errorf("%s: decoding %v %s: %w", name, h.a.shape, h.a.dtype, err)
	}
	return h.a, nil
}

// npyHead is a checked .npy header: the array (without its data), its
// dtype, element count, the byte offset of its data, and npyio's reader
// positioned there (over the bytes parseNPYHeader was given).
type npyHead struct {
	a      *npyArray
	dt     npyDtype
	n      int
	offset int
	r      *npy.Reader
}

// npyPrefix returns the length of the fixed part of a .npy file (magic,
// version, header length) and of its header, from b's first bytes (at
// least 12, or the whole file if shorter).
func npyPrefix(name string, b []byte) (prefix, hlen int, err error) {
	if !bytes.HasPrefix(b, npyMagic) || len(b) < 10 {
		return 0, 0, fmt.Errorf("%s: not a .npy array: no \\x93NUMPY magic at byte offset 0", name)
	}
	switch b[6] {
	case 1:
		prefix, hlen = 10, int(binary.LittleEndian.Uint16(b[8:]))
	case 2:
		if len(b) < 12 {
			return 0, 0, fmt.Errorf("%s: truncated .npy header at byte offset %d", name, len(b))
		}
		prefix, hlen = 12, int(min(binary.LittleEndian.Uint32(b[8:]), math.MaxInt32))
	default:
		return 0, 0, fmt.Errorf("%s: .npy format version %d.%d at byte offset 6: want 1 or 2 (npyio reads no other; numpy writes 3 only for non-ASCII field names)", name, b[6], b[7])
	}
	if hlen > maxNPYHeader {
		return 0, 0, fmt.Errorf("%s: .npy header of %d bytes at byte offset %d: want at most %d", name, hlen, prefix, maxNPYHeader)
	}
	return prefix, hlen, nil
}

// parseNPYHeader checks the header of a .npy file of size bytes whose
// first bytes (at least its prefix and header) are b, and whose array
// may hold at most limit bytes.
func parseNPYHeader(name string, b []byte, size int64, limit int) (*npyHead, error) {
	prefix, hlen, err := npyPrefix(name, b)
	if err != nil {
		return nil, err
	}
	if int64(prefix+hlen) > size || prefix+hlen > len(b) {
		return nil, fmt.Errorf("%s: .npy header of %d bytes at byte offset %d: want at most %d, within the file's %d bytes", name, hlen, prefix, maxNPYHeader, size)
	}
	hdr := b[prefix : prefix+hlen]
	if !bytes.HasSuffix(hdr, []byte("\n")) || bytes.Count(hdr, []byte("}")) != 1 {
		return nil, fmt.Errorf("%s: malformed .npy header %q: want a single dictionary ending in a newline", name, clip(hdr))
	}
	if i := bytes.Index(hdr, []byte("'descr': ")); i < 0 || bytes.HasPrefix(hdr[i+9:], []byte("[")) || bytes.HasPrefix(hdr[i+9:], []byte("{")) {
		return nil, fmt.Errorf("%s: .npy header %q: want a plain dtype (structured arrays are not image data)", name, clip(hdr))
	}
	r, err := newNPYReader(b)
	if err != nil {
		return nil, fmt.Errorf("%s: malformed .npy header %q: %w", name, clip(hdr), err)
	}
	a := &npyArray{name: name, dtype: r.Header.Descr.Type, shape: r.Header.Descr.Shape}
	dt, ok := npyDtypes[strings.Trim(a.dtype, "'")]
	if quoted := len(a.dtype) > 2 && a.dtype[0] == '\'' && a.dtype[len(a.dtype)-1] == '\''; ok && quoted {
		a.dtype = a.dtype[1 : len(a.dtype)-1]
	} else {
		ok = false
	}
	switch {
	case !ok && strings.Contains(a.dtype, "O"):
		return nil, fmt.Errorf("%s: dtype %s is a pickled object array: refused, as numpy.load(allow_pickle=False) refuses it (unpickling runs code); save plain numeric arrays", name, a.dtype)
	case !ok:
		return nil, fmt.Errorf("%s: dtype %s: want uint8 or float32 images, integer labels", name, a.dtype)
	case r.Header.Descr.Fortran && len(a.shape) > 1:
		return nil, fmt.Errorf("%s: Fortran-ordered (column-major) array of shape %v: save it in C order (numpy.ascontiguousarray)", name, a.shape)
	}
	a.kind = dt.kind
	n := 1
	for _, d := range a.shape {
		if d < 0 || (d > 0 && n > limit/dt.size/d) {
			return nil, fmt.Errorf("%s: shape %v: want non-negative dimensions of at most %d bytes in all", name, a.shape, limit)
		}
		n *= d
	}
	if got, want := size-int64(prefix+hlen), int64(n*dt.size); got != want {
		return nil, fmt.Errorf("%s: %d bytes of data after the header at byte offset %d, but shape %v of %s needs %d: truncated or corrupt", name, got, prefix+hlen, a.shape, a.dtype, want)
	}
	return &npyHead{a: a, dt: dt, n: n, offset: prefix + hlen, r: r}, nil
}

// decode has npyio read the n elements of a's data from r. The header is
// checked by then (a listed dtype, a shape that the data fills), so npyio
// should not panic; if it does all the same, that is this file's error,
// not the run's end.
func (a *npyArray) decode(r *npy.Reader, dt npyDtype, n int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("npyio failed: %v", p)
		}
	}()
	switch dt.kind {
	case 'f':
		a.f32 = make([]float32, n)
		err = r.Read(&a.f32)
	case 'u':
		a.u8 = make([]uint8, n)
		if err = r.Read(&a.u8); err == nil {
			a.ints = make([]int64, n)
			for i, v := range a.u8 {
				a.ints[i] = int64(v)
			}
		}
	default:
		a.ints, err = dt.ints(r, n)
	}
	return err
}

// newNPYReader has npyio parse the header of b. npyio slices the header
// by the positions of its keys, and panics on one it does not expect
// (keys in another order); that is the file's fault, so it is an error.
func newNPYReader(b []byte) (r *npy.Reader, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("npyio could not parse it: %v", p)
		}
	}()
	return npy.NewReader(bytes.NewReader(b))
}

// clip shortens a header for an error message.
func clip(b []byte) []byte {
	if len(b) > 120 {
		return append(b[:120:120], "..."...)
	}
	return b
}

// ReadNPZ reads an image set from a NumPy .npz archive (a zip of .npy
// files, stored or deflated) in Keras's layout: x_train, y_train, x_test,
// y_test (see imagesFromArrays for what each may hold). Other arrays in
// the archive are ignored.
func ReadNPZ(path string) (*ImageSet, error) {
	f, err := inputfile.Open(path) // a FIFO is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readNPZ(path, f, st.Size())
}

// readNPZ is ReadNPZ of the size bytes of r, named path in errors.
func readNPZ(path string, r io.ReaderAt, size int64) (*ImageSet, error) {
	return readNPZShard(path, r, size, Shard{})
}

// readNPZShard is readNPZ reading only the training rows of shard (see
// npyshard.go).
func readNPZShard(path string, r io.ReaderAt, size int64, shard Shard) (*ImageSet, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: not a .npz (zip) archive: %w", path, err)
	}
	members := map[string]*zip.File{}
	var keys []string
	for _, m := range zr.File {
		key, ok := strings.CutSuffix(m.Name, ".npy")
		if !ok || members[key] != nil {
			continue
		}
		members[key] = m
		keys = append(keys, key)
	}
	set, err := imagesFromArrays(path, keys, func(key string) (*npyArray, error) {
		switch key {
		case kerasKeys[0]:
			return readZipRows(path, r, members[key], shard)
		case kerasKeys[2]:
			return readZipRows(path, r, members[key], Shard{})
		}
		return readZipNPY(path, members[key])
	}, shard)
	if err != nil || shard.World <= 1 {
		return set, err
	}
	m := members[kerasKeys[0]]
	set.Train.Digest = fmt.Sprintf("%s %d bytes crc32 %08x", m.Name, m.UncompressedSize64, m.CRC32)
	return set, nil
}

// readZipNPY reads and parses one member of a .npz, refusing one larger
// than maxNPYBytes whatever its header claims.
func readZipNPY(path string, m *zip.File) (*npyArray, error) {
	name := path + ":" + m.Name
	if m.UncompressedSize64 > maxNPYBytes {
		return nil, fmt.Errorf("%s: %d bytes: more than %d", name, m.UncompressedSize64, maxNPYBytes)
	}
	rc, err := m.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxNPYBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: corrupt archive member: %w", name, err)
	case len(b) > maxNPYBytes:
		return nil, fmt.Errorf("%s: decompresses to more than %d bytes", name, maxNPYBytes)
	}
	return parseNPY(name, b)
}

// ReadNPYDir reads an image set from a directory holding x_train.npy,
// y_train.npy, x_test.npy and y_test.npy (np.save of each array), as
// ReadNPZ reads them from an archive.
func ReadNPYDir(dir string) (*ImageSet, error) { return readNPYDir(dir, ReadOptions{}) }

// imagesFromArrays builds an image set from Keras's four arrays, read by
// get, out of those keys holds (named in the error when one is missing).
// Images are N×H×W or N×H×W×C, uint8 (normalised x/255: UnitNorm) or
// float32 (used as stored: NoNorm, and every value finite); labels are N
// or N×1 integers, class ids 0..255; the training and test images have
// one shape and type; there are at least 2 classes.
func imagesFromArrays(where string, keys []string, get func(key string) (*npyArray, error), shard Shard) (*ImageSet, error) {
	for _, k := range kerasKeys {
		if !slices.Contains(keys, k) {
			have := "no arrays"
			if len(keys) > 0 {
				have = "arrays " + strings.Join(keys, ", ")
			}
			return nil, fmt.Errorf("%s has no array %s: it holds %s; want Keras's layout %s (as keras.datasets' mnist.npz)", where, k, have, strings.Join(kerasKeys[:], ", "))
		}
	}
	var arrays [4]*npyArray
	for i, k := range kerasKeys {
		a, err := get(k)
		if err != nil {
			return nil, err
		}
		arrays[i] = a
	}
	train, err := imagesOf(arrays[0], arrays[1], shard)
	if err != nil {
		return nil, err
	}
	test, err := imagesOf(arrays[2], arrays[3], Shard{})
	if err != nil {
		return nil, err
	}
	if !slices.Equal(arrays[0].shape[1:], arrays[2].shape[1:]) || strings.TrimLeft(arrays[0].dtype, "<>|") != strings.TrimLeft(arrays[2].dtype, "<>|") {
		return nil, fmt.Errorf("%s: x_train holds %v %s images but x_test %v %s: the training and test images must have one shape and type",
			where, arrays[0].shape[1:], arrays[0].dtype, arrays[2].shape[1:], arrays[2].dtype)
	}
	set := &ImageSet{Train: train, Test: test, Dir: where}
	if set.Classes = set.NumClasses(); set.Classes < 2 {
		return nil, fmt.Errorf("%s: y_train and y_test hold only label 0: a classification data set needs at least 2 classes", where)
	}
	return set, nil
}

// imagesOf checks one images array and its labels and joins them. An
// array N×H×W or N×H×W×C holds images (uint8 or float32); one N×L holds
// a row per example, of bytes (flattened images, 1×L), float32 features
// or integer token ids (both become float32, used as stored). x holds
// only the rows of shard.
func imagesOf(x, y *npyArray, shard Shard) (*Images, error) {
	if len(x.shape) < 2 || len(x.shape) > 4 {
		return nil, fmt.Errorf("%s: shape %v: want images N×H×W or N×H×W×C, or rows N×L (features, token ids)", x.name, x.shape)
	}
	if x.kind == 'i' && len(x.shape) != 2 {
		return nil, fmt.Errorf("%s: dtype %s: want uint8 or float32 images (integers only as N×L token sequences)", x.name, x.dtype)
	}
	if y.kind == 'f' || !(len(y.shape) == 1 || len(y.shape) == 2 && y.shape[1] == 1) {
		return nil, fmt.Errorf("%s: %v %s: want integer labels, N or N×1", y.name, y.shape, y.dtype)
	}
	n := x.shape[0]
	if y.shape[0] != n {
		return nil, fmt.Errorf("%s holds %d images but %s %d labels: want one label per image", x.name, n, y.name, y.shape[0])
	}
	if n == 0 || slices.Contains(x.shape[1:], 0) {
		return nil, fmt.Errorf("%s: shape %v: want at least one image of at least one pixel", x.name, x.shape)
	}
	im := &Images{N: n, Rows: x.shape[1], Cols: 1, Channels: 1, Labels: make([]uint8, n), Norm: UnitNorm}
	if len(x.shape) == 2 { // one row of L values per example
		im.Rows, im.Cols = 1, x.shape[1]
	} else {
		im.Cols = x.shape[2]
	}
	if len(x.shape) == 4 {
		im.Channels = x.shape[3]
	}
	if shard.World > 1 {
		im.Shard = shard
	}
	for i, l := range y.ints {
		if l < 0 || l > maxLabel {
			return nil, fmt.Errorf("%s: label %d of example %d is out of range 0..%d: labels are class ids (at most 256 classes: labels are stored as bytes, and nn's classifiers take 2 to 256)", y.name, l, i, maxLabel)
		}
		im.Labels[i] = uint8(l)
	}
	if x.kind == 'u' {
		im.Pixels = x.u8
		return im, nil
	}
	for i, v := range x.f32 {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			img := i / im.Dim()
			if shard.World > 1 {
				img = shard.Rank + img*shard.World
			}
			return nil, fmt.Errorf("%s: value %v at flat index %d (image %d): want finite pixels", x.name, v, i, img)
		}
	}
	im.Floats, im.Norm = x.f32, NoNorm
	return im, nil
}

// WriteNPZ writes set as a .npz archive in Keras's layout (x_train,
// y_train, x_test, y_test; images N×H×W, or N×H×W×C when they have more
// than one channel, uint8 or little-endian float32; uint8 labels of
// shape N), members stored as np.savez stores them (each peer reads its
// rows by offset): what numpy.load reads, the way to hand a set to
// Keras; written as held (MNIST in well under a second), whole or not.
func WriteNPZ(path string, set *ImageSet) (err error) {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("writing a .npz: %w", err)
	}
	defer func() {
		if err != nil {
			f.Abort()
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := zip.NewWriter(bw)
	member := func(name, descr string, shape []int, write func(w io.Writer) error) error {
		tuple := strings.ReplaceAll(strings.Trim(fmt.Sprint(shape), "[]"), " ", ", ") + map[bool]string{true: ","}[len(shape) == 1]
		h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
		h += strings.Repeat(" ", 63-(10+len(h))%64) + "\n" // prefix and header: a multiple of 64 bytes
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if _, err := w.Write(append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))); err != nil {
			return err
		}
		if _, err := io.WriteString(w, h); err != nil {
			return err
		}
		return write(w)
	}
	for i, im := range []*Images{set.Train, set.Test} {
		if im.Shard.World > 1 {
			return fmt.Errorf("writing %s: %s holds one peer's shard, not the set", path, kerasKeys[2*i])
		}
		shape := []int{im.N, im.Rows, im.Cols}
		if im.C() > 1 {
			shape = append(shape, im.C())
		}
		descr, write := "|u1", func(w io.Writer) error { _, err := w.Write(im.Pixels); return err }
		if im.Floats != nil {
			descr, write = "<f4", func(w io.Writer) error {
				b := make([]byte, 4*im.Dim())
				for n := range im.N {
					for j, v := range im.Floats[n*im.Dim() : (n+1)*im.Dim()] {
						binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
					}
					if _, err := w.Write(b); err != nil {
						return err
					}
				}
				return nil
			}
		}
		if err := member(kerasKeys[2*i], descr, shape, write); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := member(kerasKeys[2*i+1], "|u1", []int{im.N}, func(w io.Writer) error { _, err := w.Write(im.Labels); return err }); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Commit()
}
