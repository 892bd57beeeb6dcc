package criteo

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/meshtrain/meshtrain/data"
)

// criteoRecords writes n generated examples (seed 1) in the given format.
func criteoRecords(b *testing.B, n int, format string) []byte {
	g, err := NewGenerator(1, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	s := g.Stream(0)
	var buf bytes.Buffer
	tw, lw := data.NewTFExampleWriter(&buf), data.NewLibSVMWriter(&buf, false)
	var ex data.Example
	for range n {
		s.Next(&ex)
		var err error
		if format == "tfrecord" {
			err = tw.Write(ex)
		} else {
			err = lw.Write(ex)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return buf.Bytes()
}

// BenchmarkReadSparse reads Criteo-like examples (27 features) from memory:
// TFRecord framing + CRC + protowire decoding, or libsvm text parsing.
func BenchmarkReadSparse(b *testing.B) {
	const n = 20000
	for _, format := range []string{"tfrecord", "libsvm"} {
		b.Run(format, func(b *testing.B) {
			raw := criteoRecords(b, n, format)
			opts := data.SparseOptions{Dim: Features}
			b.SetBytes(int64(len(raw) / n))
			b.ReportAllocs()
			b.ResetTimer()
			var read int
			for read < b.N {
				var src data.Source
				var err error
				if format == "tfrecord" {
					src, err = data.NewTFExampleReader(bytes.NewReader(raw), "bench", opts)
				} else {
					src, err = data.NewLibSVMReader(bytes.NewReader(raw), "bench", opts)
				}
				if err != nil {
					b.Fatal(err)
				}
				for ; read < b.N; read++ {
					if _, err := src.Next(context.Background()); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}
