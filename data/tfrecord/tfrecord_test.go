package tfrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestMaskedCRCKnownValues pins the mask against values computed with
// TensorFlow's crc32c.Mask (the CRC-32C of the empty string is 0).
func TestMaskedCRCKnownValues(t *testing.T) {
	if got, want := MaskedCRC(nil), uint32(0xa282ead8); got != want {
		t.Errorf("MaskedCRC(empty) = %#x, want %#x", got, want)
	}
	// CRC-32C("123456789") = 0xe3069283, the standard check value.
	crc := uint32(0xe3069283)
	want := ((crc >> 15) | (crc << 17)) + 0xa282ead8
	if got := MaskedCRC([]byte("123456789")); got != want {
		t.Errorf("MaskedCRC(check) = %#x, want %#x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	records := [][]byte{{}, []byte("a"), bytes.Repeat([]byte{0xff, 0}, 5000), []byte("last")}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, rec := range records {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf, "mem")
	for i, want := range records {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d: got %d bytes, want %d", i, len(got), len(want))
		}
		if r.Record() != i {
			t.Fatalf("Record() = %d, want %d", r.Record(), i)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after last record: %v, want io.EOF", err)
	}
}

func TestCorruption(t *testing.T) {
	var good bytes.Buffer
	w := NewWriter(&good)
	for _, rec := range []string{"first", "second record"} {
		if err := w.Write([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	secondAt := headerLen + len("first") + 4
	huge := append([]byte(nil), good.Bytes()...)
	binary.LittleEndian.PutUint64(huge[secondAt:], 1<<40)
	binary.LittleEndian.PutUint32(huge[secondAt+8:], MaskedCRC(huge[secondAt:secondAt+8]))

	cases := []struct {
		name   string
		mutate func([]byte) []byte
		reason string
	}{
		{"data CRC", func(b []byte) []byte { b[secondAt+headerLen] ^= 1; return b }, "data CRC mismatch"},
		{"length CRC", func(b []byte) []byte { b[secondAt] ^= 1; return b }, "length CRC mismatch"},
		{"truncated data", func(b []byte) []byte { return b[:len(b)-3] }, "file ends inside the record"},
		{"truncated header", func(b []byte) []byte { return b[:secondAt+5] }, "file ends inside the record header"},
		{"hostile length", func([]byte) []byte { return huge }, "exceeds the limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.mutate(append([]byte(nil), good.Bytes()...))
			r := NewReader(bytes.NewReader(data), "train-00.tfrecord")
			if _, err := r.Next(); err != nil {
				t.Fatalf("first record: %v", err)
			}
			_, err := r.Next()
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want *CorruptError", err)
			}
			if ce.Resumable != (tc.name == "data CRC") {
				t.Fatalf("Resumable = %v for %s", ce.Resumable, tc.name)
			}
			if ce.Record != 1 || ce.Offset != int64(secondAt) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %+v, want record 1 at %d with %q", ce, secondAt, tc.reason)
			}
			if !strings.Contains(err.Error(), "train-00.tfrecord") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

// TestResumeAfterDataCRC checks that a record with damaged data is skipped
// and the records after it are still read.
func TestResumeAfterDataCRC(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, rec := range []string{"zero", "one", "two"} {
		if err := w.Write([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	b := buf.Bytes()
	b[headerLen+len("zero")+4+headerLen] ^= 0x40 // first data byte of "one"
	r := NewReader(bytes.NewReader(b), "f")
	if rec, err := r.Next(); err != nil || string(rec) != "zero" {
		t.Fatalf("record 0: %q, %v", rec, err)
	}
	_, err := r.Next()
	var ce *CorruptError
	if !errors.As(err, &ce) || !ce.Resumable || ce.Record != 1 {
		t.Fatalf("record 1: got %v, want a resumable *CorruptError for record 1", err)
	}
	if rec, err := r.Next(); err != nil || string(rec) != "two" || r.Record() != 2 {
		t.Fatalf("record 2: %q, %v (Record %d)", rec, err, r.Record())
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	_ = w.Write([]byte("seed"))
	_ = w.Write(nil)
	f.Add(buf.Bytes())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), "fuzz")
		r.SetMaxRecord(1 << 20)
		for i := 0; i < 1000; i++ {
			rec, err := r.Next()
			if err != nil {
				var ce *CorruptError
				if err != io.EOF && !errors.As(err, &ce) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				if ce != nil && ce.Resumable {
					continue
				}
				return
			}
			// A record that passed both CRCs must re-encode to the same bytes.
			var out bytes.Buffer
			if err := NewWriter(&out).Write(rec); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func BenchmarkReadWrite(b *testing.B) {
	rec := bytes.Repeat([]byte{7}, 200)
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := 0; i < 1000; i++ {
		_ = w.Write(rec)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench")
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
