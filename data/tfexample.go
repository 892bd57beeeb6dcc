package data

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/meshtrain/meshtrain/data/tfrecord"
)

// The sparse TFRecord layout: each record is a serialized tf.train.Example
// with three features,
//
//	'label'  int64_list of one value, -1/+1 (0/1 also accepted)
//	'index'  int64_list of feature indices in [0, D)
//	'value'  float_list, one value per index
//
// decoded here with protowire from the schema
//
//	Example  { Features features = 1; }
//	Features { map<string, Feature> feature = 1; }   // entries: key = 1, value = 2
//	Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//	FloatList { repeated float value = 1; }  Int64List { repeated int64 value = 1; }
//
// Repeated scalars are accepted packed or not, unknown fields and other
// features are skipped, and as protobuf prescribes, the last occurrence of a
// map key or a oneof field wins.

// Feature keys of the sparse TFRecord layout.
const (
	TFLabelKey = "label"
	TFIndexKey = "index"
	TFValueKey = "value"
)

// RecordError is a bad record in an input file: File and Record locate it
// (Record is a 1-based line number for text formats, a 0-based record index
// for TFRecord, as Unit says) and Err says what is wrong.
type RecordError struct {
	File   string
	Unit   string // "line" or "record"
	Record int
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s: %s %d: %v", e.File, e.Unit, e.Record, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// SparseOptions configures the sparse readers (libsvm and TFRecord).
type SparseOptions struct {
	// Dim is the number of features D; every index must be in [0, Dim).
	Dim int
	// ZeroBased (libsvm only) says the file's indices start at 0. The
	// libsvm default is 1-based: "1:0.5" is feature 0.
	ZeroBased bool
	// SkipCorrupt skips bad records instead of failing, counting them
	// (Skipped) and reporting each to OnSkip. A TFRecord record whose data
	// fails its CRC is skipped alone; damage to a length or a truncation
	// leaves no trustworthy boundary to resume from, so it skips the rest of
	// that file, counted as one record.
	SkipCorrupt bool
	// OnSkip, if set, is called with each skipped record's error (to log it).
	OnSkip func(error)
	// Inputs, if set, watches the files opened (see Inputs): a file that
	// changes between reads fails the read. Without it, files must still
	// be regular files.
	Inputs *Inputs
}

func (o SparseOptions) check() error {
	if o.Dim <= 0 || o.Dim > math.MaxInt32 {
		return fmt.Errorf("sparse input: feature count %d: want 1..%d (set --features)", o.Dim, math.MaxInt32)
	}
	return nil
}

// Normalize checks ex and puts it in the form the readers give (see
// finishSparse), for examples made elsewhere, such as a generator's.
func (ex *Example) Normalize(dim int) error { return finishSparse(ex, dim, 0) }

// finishSparse checks and normalises one decoded sparse example in place:
// indices sorted (sorted here if the file did not), unique and in [0, dim),
// values finite, label -1/+1 or 0/1. base is what the file adds to an index
// (1 for 1-based libsvm): errors give indices as the file writes them.
func finishSparse(ex *Example, dim int, base int32) error {
	if ex.Label != 1 && ex.Label != -1 && ex.Label != 0 {
		return fmt.Errorf("label %v: want -1/+1 or 0/1", ex.Label)
	}
	if len(ex.Indices) != len(ex.Values) {
		return fmt.Errorf("%d indices but %d values", len(ex.Indices), len(ex.Values))
	}
	sorted := true
	for k, i := range ex.Indices {
		if i < 0 || int64(i) >= int64(dim) {
			return fmt.Errorf("feature index %d is outside [%d, %d)", int64(i)+int64(base), base, int64(dim)+int64(base))
		}
		if v := float64(ex.Values[k]); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("value %v of feature index %d is not finite", ex.Values[k], int64(i)+int64(base))
		}
		if k > 0 && i <= ex.Indices[k-1] {
			sorted = false
		}
	}
	if !sorted {
		sort.Sort(byIndex{ex.Indices, ex.Values})
	}
	for k := 1; k < len(ex.Indices); k++ {
		if ex.Indices[k] == ex.Indices[k-1] {
			return fmt.Errorf("feature index %d appears twice", int64(ex.Indices[k])+int64(base))
		}
	}
	return nil
}

type byIndex struct {
	idx []int32
	val []float32
}

func (b byIndex) Len() int           { return len(b.idx) }
func (b byIndex) Less(i, j int) bool { return b.idx[i] < b.idx[j] }
func (b byIndex) Swap(i, j int) {
	b.idx[i], b.idx[j] = b.idx[j], b.idx[i]
	b.val[i], b.val[j] = b.val[j], b.val[i]
}

// AppendTFExample appends ex, a sparse example, as a serialized
// tf.train.Example in the layout above (label as int64, lists packed).
func AppendTFExample(dst []byte, ex Example) []byte {
	label := []int64{int64(ex.Label)}
	labelFeat := int64ListSize(label)
	var idxPayload int
	for _, i := range ex.Indices {
		idxPayload += protowire.SizeVarint(uint64(int64(i)))
	}
	indexFeat := listSize(idxPayload)
	valueFeat := listSize(4 * len(ex.Values))
	entries := entrySize(TFLabelKey, 3, labelFeat) + entrySize(TFIndexKey, 3, indexFeat) + entrySize(TFValueKey, 2, valueFeat)

	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // Example.features
	dst = protowire.AppendVarint(dst, uint64(entries))
	dst = appendEntryHead(dst, TFLabelKey, 3, labelFeat)
	dst = appendListHead(dst, protowire.SizeVarint(uint64(label[0])))
	dst = protowire.AppendVarint(dst, uint64(label[0]))
	dst = appendEntryHead(dst, TFIndexKey, 3, indexFeat)
	dst = appendListHead(dst, idxPayload)
	for _, i := range ex.Indices {
		dst = protowire.AppendVarint(dst, uint64(int64(i)))
	}
	dst = appendEntryHead(dst, TFValueKey, 2, valueFeat)
	dst = appendListHead(dst, 4*len(ex.Values))
	for _, v := range ex.Values {
		dst = protowire.AppendFixed32(dst, math.Float32bits(v))
	}
	return dst
}

func int64ListSize(v []int64) int {
	var n int
	for _, x := range v {
		n += protowire.SizeVarint(uint64(x))
	}
	return listSize(n)
}

// listSize is the size of a FloatList/Int64List holding one packed field of
// payload bytes.
func listSize(payload int) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(payload)
}

// entrySize is the size of a map entry (tag and length included) whose
// Feature holds the list as field kind with list size listLen.
func entrySize(key string, kind protowire.Number, listLen int) int {
	feature := protowire.SizeTag(kind) + protowire.SizeBytes(listLen)
	entry := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeBytes(feature)
	return protowire.SizeTag(1) + protowire.SizeBytes(entry)
}

func appendEntryHead(dst []byte, key string, kind protowire.Number, listLen int) []byte {
	feature := protowire.SizeTag(kind) + protowire.SizeBytes(listLen)
	entry := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeBytes(feature)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // Features.feature
	dst = protowire.AppendVarint(dst, uint64(entry))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // entry key
	dst = protowire.AppendString(dst, key)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType) // entry value
	dst = protowire.AppendVarint(dst, uint64(feature))
	dst = protowire.AppendTag(dst, kind, protowire.BytesType) // Feature.kind
	return protowire.AppendVarint(dst, uint64(listLen))
}

func appendListHead(dst []byte, payload int) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // packed value
	return protowire.AppendVarint(dst, uint64(payload))
}

// tfExampleDecoder decodes the sparse layout, reusing its buffers.
type tfExampleDecoder struct {
	labels, index []int64
}

// Feature kinds (Feature's oneof field numbers).
const (
	kindBytes = 1
	kindFloat = 2
	kindInt64 = 3
)

// DecodeTFExample decodes a serialized tf.train.Example in the sparse layout
// into ex, reusing ex's slices, and checks it: indices in [0, dim) (sorted
// if the record did not), finite values, one per index, a single -1/+1 or
// 0/1 label, and all three keys present.
func DecodeTFExample(b []byte, ex *Example, dim int) error {
	var d tfExampleDecoder
	return d.decode(b, ex, dim)
}

func (d *tfExampleDecoder) decode(b []byte, ex *Example, dim int) error {
	ex.Features = nil
	ex.Indices, ex.Values = ex.Indices[:0], ex.Values[:0]
	d.labels, d.index = d.labels[:0], d.index[:0]
	var seen [3]bool // label, index, value
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil // not Example.features
		}
		return forEachField(v, func(num protowire.Number, typ protowire.Type, entry []byte) error {
			if num != 1 || typ != protowire.BytesType {
				return nil // not Features.feature
			}
			key, feature, err := mapEntry(entry)
			if err != nil {
				return err
			}
			var want protowire.Number
			var which int
			switch key {
			case TFLabelKey:
				want, which = kindInt64, 0
				d.labels = d.labels[:0]
			case TFIndexKey:
				want, which = kindInt64, 1
				d.index = d.index[:0]
			case TFValueKey:
				want, which = kindFloat, 2
				ex.Values = ex.Values[:0]
			default:
				return nil
			}
			seen[which] = true
			return forEachField(feature, func(kind protowire.Number, typ protowire.Type, list []byte) error {
				if kind < kindBytes || kind > kindInt64 {
					return nil
				}
				if typ != protowire.BytesType {
					return fmt.Errorf("feature %q: malformed Feature (field %d has wire type %d)", key, kind, typ)
				}
				if kind != want {
					return fmt.Errorf("feature %q is a %s, want %s", key, kindName(kind), kindName(want))
				}
				var err error
				switch which {
				case 0:
					d.labels, err = appendInt64s(d.labels, list)
				case 1:
					d.index, err = appendInt64s(d.index[:0], list)
				default:
					ex.Values, err = appendFloats(ex.Values, list)
				}
				return err
			})
		})
	})
	if err != nil {
		return err
	}
	for k, key := range []string{TFLabelKey, TFIndexKey, TFValueKey} {
		if !seen[k] {
			return fmt.Errorf("missing feature %q: want 'label' (int64), 'index' (int64 list) and 'value' (float list)", key)
		}
	}
	if len(d.labels) != 1 {
		return fmt.Errorf("feature %q has %d values, want exactly one", TFLabelKey, len(d.labels))
	}
	if l := d.labels[0]; l != 1 && l != -1 && l != 0 {
		return fmt.Errorf("label %d: want -1/+1 or 0/1", l)
	}
	ex.Label = float32(d.labels[0])
	for _, x := range d.index {
		if x < 0 || x >= int64(dim) {
			return fmt.Errorf("feature index %d is outside [0, %d)", x, dim)
		}
		ex.Indices = append(ex.Indices, int32(x))
	}
	if len(ex.Indices) == 0 {
		ex.Indices, ex.Values = nil, nil
		return nil
	}
	return finishSparse(ex, dim, 0)
}

func kindName(k protowire.Number) string {
	switch k {
	case kindBytes:
		return "bytes_list"
	case kindFloat:
		return "float_list"
	case kindInt64:
		return "int64_list"
	}
	return fmt.Sprintf("field %d", k)
}

// forEachField calls fn for every top-level field of the message b, with
// the field's raw value: the payload for length-delimited fields, the
// encoded bytes otherwise.
func forEachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("malformed protobuf: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n >= 0 {
				v = b[:n]
			}
		}
		if n < 0 {
			return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry splits a map<string, Feature> entry; a missing key or value
// means the empty string or an empty Feature, as in protobuf.
func mapEntry(b []byte) (key string, value []byte, err error) {
	var keyBytes []byte
	err = forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			if num == 1 || num == 2 {
				return fmt.Errorf("malformed feature map entry (field %d has wire type %d)", num, typ)
			}
			return nil
		}
		switch num {
		case 1:
			keyBytes = v
		case 2:
			value = v
		}
		return nil
	})
	// Compared against constants, string(keyBytes) does not allocate; it is
	// only kept for the three known keys, which are constants too.
	switch string(keyBytes) {
	case TFLabelKey:
		key = TFLabelKey
	case TFIndexKey:
		key = TFIndexKey
	case TFValueKey:
		key = TFValueKey
	}
	return key, value, err
}

// appendInt64s appends the values of an Int64List message (value = 1,
// packed or not) to dst.
func appendInt64s(dst []int64, list []byte) ([]int64, error) {
	for len(list) > 0 {
		num, typ, n := protowire.ConsumeTag(list)
		if n < 0 {
			return dst, fmt.Errorf("malformed int64 list: %w", protowire.ParseError(n))
		}
		list = list[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(list)
			if n < 0 {
				return dst, fmt.Errorf("malformed int64 list: %w", protowire.ParseError(n))
			}
			list = list[n:]
			for len(v) > 0 {
				x, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return dst, fmt.Errorf("malformed packed int64 list: %w", protowire.ParseError(n))
				}
				dst = append(dst, int64(x))
				v = v[n:]
			}
		case num == 1 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(list)
			if n < 0 {
				return dst, fmt.Errorf("malformed int64 list: %w", protowire.ParseError(n))
			}
			dst = append(dst, int64(x))
			list = list[n:]
		case num == 1:
			return dst, fmt.Errorf("int64 list value has wire type %d", typ)
		default:
			n := protowire.ConsumeFieldValue(num, typ, list)
			if n < 0 {
				return dst, fmt.Errorf("malformed int64 list: %w", protowire.ParseError(n))
			}
			list = list[n:]
		}
	}
	return dst, nil
}

// appendFloats appends the values of a FloatList message (value = 1, packed
// or not) to dst.
func appendFloats(dst []float32, list []byte) ([]float32, error) {
	for len(list) > 0 {
		num, typ, n := protowire.ConsumeTag(list)
		if n < 0 {
			return dst, fmt.Errorf("malformed float list: %w", protowire.ParseError(n))
		}
		list = list[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(list)
			if n < 0 {
				return dst, fmt.Errorf("malformed float list: %w", protowire.ParseError(n))
			}
			list = list[n:]
			if len(v)%4 != 0 {
				return dst, fmt.Errorf("malformed packed float list of %d bytes (not a multiple of 4)", len(v))
			}
			for ; len(v) >= 4; v = v[4:] {
				dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(v)))
			}
		case num == 1 && typ == protowire.Fixed32Type:
			x, n := protowire.ConsumeFixed32(list)
			if n < 0 {
				return dst, fmt.Errorf("malformed float list: %w", protowire.ParseError(n))
			}
			dst = append(dst, math.Float32frombits(x))
			list = list[n:]
		case num == 1:
			return dst, fmt.Errorf("float list value has wire type %d", typ)
		default:
			n := protowire.ConsumeFieldValue(num, typ, list)
			if n < 0 {
				return dst, fmt.Errorf("malformed float list: %w", protowire.ParseError(n))
			}
			list = list[n:]
		}
	}
	return dst, nil
}

// TFExampleReader is a Source over a TFRecord file of sparse
// tf.train.Examples. The returned Example's slices are reused by the next
// call.
type TFExampleReader struct {
	r       *tfrecord.Reader
	name    string
	opts    SparseOptions
	dec     tfExampleDecoder
	ex      Example
	skipped int
	closer  io.Closer
	done    bool
}

// NewTFExampleReader returns a Source over the TFRecord stream r; name
// identifies it in errors.
func NewTFExampleReader(r io.Reader, name string, opts SparseOptions) (*TFExampleReader, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &TFExampleReader{r: tfrecord.NewReader(r, name), name: name, opts: opts}, nil
}

// Next returns the next example, io.EOF at the end, or a *RecordError (or,
// for framing damage, an error wrapping *tfrecord.CorruptError) naming the
// file and record.
func (t *TFExampleReader) Next(ctx context.Context) (Example, error) {
	for {
		if t.done {
			return Example{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return Example{}, err
		}
		rec, err := t.r.Next()
		if err == io.EOF {
			t.done = true
			return Example{}, io.EOF
		}
		if err != nil {
			var corrupt *tfrecord.CorruptError
			if t.opts.SkipCorrupt && errors.As(err, &corrupt) {
				if corrupt.Resumable {
					t.skip(err)
					continue
				}
				t.done = true
				t.skip(fmt.Errorf("skipping the rest of the file: %w", err))
				return Example{}, io.EOF
			}
			return Example{}, err
		}
		if err := t.dec.decode(rec, &t.ex, t.opts.Dim); err != nil {
			rerr := &RecordError{File: t.name, Unit: "record", Record: t.r.Record(), Err: err}
			if t.opts.SkipCorrupt {
				t.skip(rerr)
				continue
			}
			return Example{}, rerr
		}
		return t.ex, nil
	}
}

func (t *TFExampleReader) skip(err error) {
	t.skipped++
	if t.opts.OnSkip != nil {
		t.opts.OnSkip(err)
	}
}

// Skipped returns how many corrupt records were skipped (SkipCorrupt).
func (t *TFExampleReader) Skipped() int { return t.skipped }

// Close closes the file if the reader was opened by OpenTFExample.
func (t *TFExampleReader) Close() error {
	if t.closer == nil {
		return nil
	}
	return t.closer.Close()
}

// OpenTFExample returns an Opener for NewFilePipeline over sparse TFRecord
// files; each Source closes its file when the pipeline is done with it.
func OpenTFExample(opts SparseOptions) Opener {
	return func(ctx context.Context, path string) (Source, error) {
		f, err := opts.Inputs.Open(path)
		if err != nil {
			return nil, err
		}
		r, err := NewTFExampleReader(f, path, opts)
		if err != nil {
			f.Close()
			return nil, err
		}
		r.closer = f
		return r, nil
	}
}

// TFExampleWriter writes sparse examples as TFRecord-framed tf.train.Examples.
type TFExampleWriter struct {
	w   *tfrecord.Writer
	buf []byte
}

// NewTFExampleWriter returns a writer onto w (wrap files in a bufio.Writer).
func NewTFExampleWriter(w io.Writer) *TFExampleWriter {
	return &TFExampleWriter{w: tfrecord.NewWriter(w)}
}

// Write writes one sparse example.
func (t *TFExampleWriter) Write(ex Example) error {
	t.buf = AppendTFExample(t.buf[:0], ex)
	return t.w.Write(t.buf)
}
