package data

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/meshtrain/meshtrain/data/tfrecord"
)

// exampleDescriptor builds tensorflow/core/example/{example,feature}.proto
// at run time, so the real protobuf library can check our hand-rolled
// encoder and decoder against the schema.
func exampleDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	s := proto.String
	i := func(v int32) *int32 { return &v }
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	field := func(name string, num int32, label *descriptorpb.FieldDescriptorProto_Label, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: s(name), Number: i(num), Label: label, Type: typ.Enum(), JsonName: s(name)}
		if typeName != "" {
			f.TypeName = s(typeName)
		}
		return f
	}
	oneof := func(f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
		f.OneofIndex = i(0)
		return f
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    s("tensorflow/example.proto"),
		Package: s("tensorflow"),
		Syntax:  s("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: s("BytesList"), Field: []*descriptorpb.FieldDescriptorProto{field("value", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "")}},
			{Name: s("FloatList"), Field: []*descriptorpb.FieldDescriptorProto{field("value", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "")}},
			{Name: s("Int64List"), Field: []*descriptorpb.FieldDescriptorProto{field("value", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_INT64, "")}},
			{
				Name: s("Feature"),
				Field: []*descriptorpb.FieldDescriptorProto{
					oneof(field("bytes_list", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".tensorflow.BytesList")),
					oneof(field("float_list", 2, opt, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".tensorflow.FloatList")),
					oneof(field("int64_list", 3, opt, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".tensorflow.Int64List")),
				},
				OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: s("kind")}},
			},
			{
				Name:  s("Features"),
				Field: []*descriptorpb.FieldDescriptorProto{field("feature", 1, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry")},
				NestedType: []*descriptorpb.DescriptorProto{{
					Name: s("FeatureEntry"),
					Field: []*descriptorpb.FieldDescriptorProto{
						field("key", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
						field("value", 2, opt, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".tensorflow.Feature"),
					},
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
				}},
			},
			{Name: s("Example"), Field: []*descriptorpb.FieldDescriptorProto{field("features", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".tensorflow.Features")}},
		},
	}
	file, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatalf("building tf.train.Example descriptor: %v", err)
	}
	return file.Messages().ByName("Example")
}

// dynExample builds a tf.train.Example with the given features through the
// protobuf library; values are []int64, []float32 or [][]byte.
func dynExample(md protoreflect.MessageDescriptor, feats map[string]any) *dynamicpb.Message {
	ex := dynamicpb.NewMessage(md)
	fsField := md.Fields().ByName("features")
	fs := ex.Mutable(fsField).Message()
	m := fs.Mutable(fs.Descriptor().Fields().ByName("feature")).Map()
	featDesc := fs.Descriptor().Fields().ByName("feature").MapValue().Message()
	for k, v := range feats {
		f := dynamicpb.NewMessage(featDesc)
		var kind string
		switch v.(type) {
		case []int64:
			kind = "int64_list"
		case []float32:
			kind = "float_list"
		case [][]byte:
			kind = "bytes_list"
		}
		kf := featDesc.Fields().ByName(protoreflect.Name(kind))
		list := f.Mutable(kf).Message()
		vals := list.Mutable(list.Descriptor().Fields().ByName("value")).List()
		switch v := v.(type) {
		case []int64:
			for _, x := range v {
				vals.Append(protoreflect.ValueOfInt64(x))
			}
		case []float32:
			for _, x := range v {
				vals.Append(protoreflect.ValueOfFloat32(x))
			}
		case [][]byte:
			for _, x := range v {
				vals.Append(protoreflect.ValueOfBytes(x))
			}
		}
		m.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfMessage(f))
	}
	return ex
}

func randomSparseExample(r *rand.Rand, dim int) Example {
	ex := Example{Label: float32(2*r.IntN(2) - 1)}
	for i := 0; i < dim; i++ {
		if r.IntN(8) == 0 {
			ex.Indices = append(ex.Indices, int32(i))
			ex.Values = append(ex.Values, float32(r.NormFloat64()))
		}
	}
	return ex
}

func sameExample(a, b Example) bool {
	if a.Label != b.Label || len(a.Indices) != len(b.Indices) || len(a.Values) != len(b.Values) {
		return false
	}
	for k := range a.Indices {
		if a.Indices[k] != b.Indices[k] || a.Values[k] != b.Values[k] {
			return false
		}
	}
	return true
}

func TestTFExampleAgainstProtobuf(t *testing.T) {
	md := exampleDescriptor(t)
	r := rand.New(rand.NewPCG(1, 1))
	const dim = 1 << 20
	var got Example
	for trial := 0; trial < 100; trial++ {
		ex := randomSparseExample(r, 64)
		scale := int32(1 + r.IntN(dim/64-1)) // large indices: multi-byte varints
		for k := range ex.Indices {
			ex.Indices[k] *= scale
		}
		// Our encoder -> the protobuf library.
		b := AppendTFExample(nil, ex)
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(b, msg); err != nil {
			t.Fatalf("trial %d: protobuf rejects our encoding: %v", trial, err)
		}
		want := dynExample(md, map[string]any{
			TFLabelKey: []int64{int64(ex.Label)},
			TFIndexKey: toInt64s(ex.Indices),
			TFValueKey: ex.Values,
		})
		if !proto.Equal(msg, want) {
			t.Fatalf("trial %d: our encoding decodes as\n%v\nwant\n%v", trial, msg, want)
		}
		// The protobuf library (with an extra feature, random map order) -> our decoder.
		extra := dynExample(md, map[string]any{
			TFLabelKey: []int64{int64(ex.Label)},
			TFIndexKey: toInt64s(ex.Indices),
			TFValueKey: ex.Values,
			"name":     [][]byte{[]byte("ad"), nil},
			"weights":  []float32{1, 2},
		})
		b2, err := proto.Marshal(extra)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeTFExample(b2, &got, dim); err != nil {
			t.Fatalf("trial %d: decoding the protobuf library's encoding: %v", trial, err)
		}
		if !sameExample(got, ex) {
			t.Fatalf("trial %d: decoded %+v, want %+v", trial, got, ex)
		}
	}
}

func toInt64s(v []int32) []int64 {
	out := make([]int64, len(v))
	for k, x := range v {
		out[k] = int64(x)
	}
	return out
}

// rawExample assembles an Example from hand-encoded map entries.
func rawExample(entries ...[]byte) []byte {
	var feats []byte
	for _, e := range entries {
		feats = protowire.AppendTag(feats, 1, protowire.BytesType)
		feats = protowire.AppendBytes(feats, e)
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, feats)
}

// rawEntry is one map entry whose Feature has the list as field kind.
func rawEntry(key string, kind protowire.Number, list []byte) []byte {
	feat := protowire.AppendTag(nil, kind, protowire.BytesType)
	feat = protowire.AppendBytes(feat, list)
	e := protowire.AppendTag(nil, 1, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	return protowire.AppendBytes(e, feat)
}

func unpackedInts(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(x))
	}
	return b
}

func unpackedFloats(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = protowire.AppendTag(b, 1, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(x))
	}
	return b
}

func packedInts(v ...int64) []byte {
	var p []byte
	for _, x := range v {
		p = protowire.AppendVarint(p, uint64(x))
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, p)
}

func TestDecodeTFExampleUnpackedAndUnsorted(t *testing.T) {
	b := rawExample(
		rawEntry("value", kindFloat, unpackedFloats(0.5, 2, -1)),
		rawEntry("index", kindInt64, unpackedInts(9, 3, 5)),
		rawEntry("label", kindInt64, unpackedInts(-1)),
	)
	var ex Example
	if err := DecodeTFExample(b, &ex, 10); err != nil {
		t.Fatal(err)
	}
	want := Example{Label: -1, Indices: []int32{3, 5, 9}, Values: []float32{2, -1, 0.5}}
	if !sameExample(ex, want) {
		t.Fatalf("decoded %+v, want %+v (sorted by index)", ex, want)
	}
}

func TestDecodeTFExampleRejects(t *testing.T) {
	label := rawEntry("label", kindInt64, packedInts(1))
	index := rawEntry("index", kindInt64, packedInts(1, 2))
	value := rawEntry("value", kindFloat, unpackedFloats(1, 1))
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"missing label", rawExample(index, value), `missing feature "label"`},
		{"missing index", rawExample(label, value), `missing feature "index"`},
		{"missing value", rawExample(label, index), `missing feature "value"`},
		{"label as float", rawExample(rawEntry("label", kindFloat, unpackedFloats(1)), index, value), `"label" is a float_list, want int64_list`},
		{"two labels", rawExample(rawEntry("label", kindInt64, packedInts(1, 1)), index, value), "2 values, want exactly one"},
		{"label 2", rawExample(rawEntry("label", kindInt64, packedInts(2)), index, value), "label 2"},
		{"index too large", rawExample(label, rawEntry("index", kindInt64, packedInts(1, 10)), value), "feature index 10 is outside [0, 10)"},
		{"negative index", rawExample(label, rawEntry("index", kindInt64, packedInts(-1, 2)), value), "feature index -1"},
		{"nan", rawExample(label, index, rawEntry("value", kindFloat, unpackedFloats(1, float32(math.NaN())))), "not finite"},
		{"count mismatch", rawExample(label, index, rawEntry("value", kindFloat, unpackedFloats(1))), "2 indices but 1 values"},
		{"duplicate", rawExample(label, rawEntry("index", kindInt64, packedInts(2, 2)), value), "appears twice"},
		{"truncated", rawExample(label, index, value)[:20], "malformed protobuf"},
		{"bad packed floats", rawExample(label, index, rawEntry("value", kindFloat, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{1, 2, 3}))), "not a multiple of 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ex Example
			err := DecodeTFExample(tc.b, &ex, 10)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeTFExample: %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func writeTFExamples(t testing.TB, exs []Example) []byte {
	var buf bytes.Buffer
	w := NewTFExampleWriter(&buf)
	for _, ex := range exs {
		if err := w.Write(ex); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readAll(t testing.TB, src Source) ([]Example, error) {
	var out []Example
	for {
		ex, err := src.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, Example{Label: ex.Label, Indices: append([]int32(nil), ex.Indices...), Values: append([]float32(nil), ex.Values...)})
	}
}

func TestTFExampleRecordRoundTripAndCorruption(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	exs := make([]Example, 20)
	for i := range exs {
		exs[i] = randomSparseExample(r, 100)
	}
	exs[4] = Example{Label: 1} // no features at all
	raw := writeTFExamples(t, exs)
	src, err := NewTFExampleReader(bytes.NewReader(raw), "train.tfrecord", SparseOptions{Dim: 100})
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(exs) {
		t.Fatalf("read %d examples, wrote %d", len(got), len(exs))
	}
	for i := range exs {
		if !sameExample(got[i], exs[i]) {
			t.Fatalf("example %d: read %+v, wrote %+v", i, got[i], exs[i])
		}
	}

	// Flip one byte inside record 3's data: its CRC no longer matches.
	off := 0
	for i := 0; i < 3; i++ {
		off += 12 + len(AppendTFExample(nil, exs[i])) + 4
	}
	bad := append([]byte(nil), raw...)
	bad[off+12+5] ^= 0x40
	src, _ = NewTFExampleReader(bytes.NewReader(bad), "train.tfrecord", SparseOptions{Dim: 100})
	got, err = readAll(t, src)
	var corrupt *tfrecord.CorruptError
	if !errors.As(err, &corrupt) || corrupt.Record != 3 || !strings.Contains(err.Error(), "train.tfrecord") || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("corrupt CRC: got %v, want a CRC error naming train.tfrecord record 3", err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d good records before the corrupt one, want 3", len(got))
	}
	var skippedErrs []error
	src, _ = NewTFExampleReader(bytes.NewReader(bad), "train.tfrecord", SparseOptions{Dim: 100, SkipCorrupt: true, OnSkip: func(err error) { skippedErrs = append(skippedErrs, err) }})
	got, err = readAll(t, src)
	// Only record 3's data is damaged; its length is intact, so the reader
	// skips that one record and keeps every other.
	if err != nil || len(got) != len(exs)-1 || src.Skipped() != 1 || len(skippedErrs) != 1 {
		t.Fatalf("skip-corrupt over a data CRC error: %d examples, %d skipped, err %v; want %d, 1, nil", len(got), src.Skipped(), err, len(exs)-1)
	}
	if !sameExample(got[3], exs[4]) {
		t.Fatalf("after the skipped record: read %+v, want record 4 %+v", got[3], exs[4])
	}

	// Damage record 3's length instead: no boundary can be trusted after it,
	// so the rest of the file is skipped, counted as one record.
	badLen := append([]byte(nil), raw...)
	badLen[off] ^= 0x01
	src, _ = NewTFExampleReader(bytes.NewReader(badLen), "train.tfrecord", SparseOptions{Dim: 100, SkipCorrupt: true})
	got, err = readAll(t, src)
	if err != nil || len(got) != 3 || src.Skipped() != 1 {
		t.Fatalf("skip-corrupt over a length error: %d examples, %d skipped, err %v; want 3, 1, nil", len(got), src.Skipped(), err)
	}
}

func TestTFExampleReaderBadRecords(t *testing.T) {
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf)
	good := AppendTFExample(nil, Example{Label: 1, Indices: []int32{1}, Values: []float32{1}})
	for _, rec := range [][]byte{
		good,
		AppendTFExample(nil, Example{Label: 1, Indices: []int32{50}, Values: []float32{1}}), // index >= Dim
		good,
		rawExample(rawEntry("label", kindInt64, packedInts(1))), // no index/value
		good,
	} {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := NewTFExampleReader(bytes.NewReader(buf.Bytes()), "f.tfrecord", SparseOptions{Dim: 10})
	got, err := readAll(t, src)
	var rerr *RecordError
	if !errors.As(err, &rerr) || rerr.Record != 1 || len(got) != 1 || !strings.Contains(err.Error(), "f.tfrecord: record 1: feature index 50 is outside [0, 10)") {
		t.Fatalf("got %d examples and %v; want 1 and an error naming f.tfrecord record 1", len(got), err)
	}
	var msgs []string
	src, _ = NewTFExampleReader(bytes.NewReader(buf.Bytes()), "f.tfrecord", SparseOptions{Dim: 10, SkipCorrupt: true, OnSkip: func(err error) { msgs = append(msgs, err.Error()) }})
	got, err = readAll(t, src)
	if err != nil || len(got) != 3 || src.Skipped() != 2 {
		t.Fatalf("skip-corrupt: %d examples, %d skipped, %v; want 3, 2, nil", len(got), src.Skipped(), err)
	}
	if !strings.Contains(msgs[1], "record 3: missing feature") {
		t.Fatalf("second skip reported as %q", msgs[1])
	}
}

// TestSparseFilesThroughPipeline reads multi-file sparse input with FILE
// sharding: each of 3 ranks must get exactly its files' examples.
func TestSparseFilesThroughPipeline(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 3))
	var files []string
	perFile := map[string][]Example{}
	for f := 0; f < 6; f++ {
		exs := make([]Example, 5+f)
		for i := range exs {
			exs[i] = randomSparseExample(r, 50)
			exs[i].Indices = append(exs[i].Indices, int32(100+f)) // tag the file
			exs[i].Values = append(exs[i].Values, 1)
		}
		var path string
		if f%2 == 0 {
			path = filepath.Join(dir, "part-"+string(rune('a'+f))+".tfrecord")
			if err := os.WriteFile(path, writeTFExamples(t, exs), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			path = filepath.Join(dir, "part-"+string(rune('a'+f))+".libsvm")
			var buf bytes.Buffer
			lw := NewLibSVMWriter(&buf, false)
			for _, ex := range exs {
				if err := lw.Write(ex); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, path)
		perFile[path] = exs
	}
	opts := SparseOptions{Dim: 200}
	open := func(ctx context.Context, path string) (Source, error) {
		if strings.HasSuffix(path, ".libsvm") {
			return OpenLibSVM(opts)(ctx, path)
		}
		return OpenTFExample(opts)(ctx, path)
	}
	for rank := 0; rank < 3; rank++ {
		p, err := NewFilePipeline(context.Background(), files, open, Config{Rank: rank, World: 3, Policy: ShardFile, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		want := map[int32]int{}
		for f := rank; f < len(files); f += 3 {
			want[int32(100+f)] = len(perFile[files[f]])
		}
		got := map[int32]int{}
		for {
			b, err := p.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for row := 0; row < b.Size; row++ {
				got[b.Indices[b.RowPtr[row+1]-1]]++
			}
		}
		p.Close()
		if len(got) != len(want) {
			t.Fatalf("rank %d read files %v, want %v", rank, got, want)
		}
		for f, n := range want {
			if got[f] != n {
				t.Fatalf("rank %d: %d examples from file tag %d, want %d", rank, got[f], f, n)
			}
		}
	}
}

func FuzzDecodeTFExample(f *testing.F) {
	f.Add(AppendTFExample(nil, Example{Label: 1, Indices: []int32{0, 5, 99}, Values: []float32{1, 2, 3}}))
	f.Add(AppendTFExample(nil, Example{Label: -1}))
	f.Add(rawExample(rawEntry("value", kindFloat, unpackedFloats(0.5, 2)), rawEntry("index", kindInt64, unpackedInts(9, 3)), rawEntry("label", kindInt64, unpackedInts(0))))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ex Example
		if err := DecodeTFExample(b, &ex, 100); err != nil {
			return
		}
		if err := finishSparse(&ex, 100, 0); err != nil {
			t.Fatalf("decoded an invalid example: %v", err)
		}
		var again Example
		if err := DecodeTFExample(AppendTFExample(nil, ex), &again, 100); err != nil || !sameExample(ex, again) {
			t.Fatalf("re-encoding %+v: %v, %+v", ex, err, again)
		}
	})
}
