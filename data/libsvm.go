package data

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// The libsvm / svmlight text format, one example per line:
//
//	<label> <index>:<value> <index>:<value> ... [# comment]
//
// Labels are -1/+1 (or 0/1). Indices are 1-based by default, as libsvm and
// svmlight write them, so "1:0.5" is feature 0; set SparseOptions.ZeroBased
// for files whose indices start at 0. Indices should be ascending, as the
// format requires; a line that is not sorted is sorted, a repeated index is
// an error. svmlight's "qid:<n>" token is accepted and ignored; blank lines
// and lines holding only a comment are skipped (but still counted, so error
// line numbers match an editor's).

// maxLibSVMLine bounds a line, so a file without newlines cannot exhaust
// memory: 64 MB is millions of features on one line.
const maxLibSVMLine = 64 << 20

// LibSVMReader is a Source over libsvm text. The returned Example's slices
// are reused by the next call.
type LibSVMReader struct {
	r       *bufio.Reader
	buf     []byte // a line read in pieces
	maxLine int
	name    string
	opts    SparseOptions
	line    int
	ex      Example
	skipped int
	closer  io.Closer
}

// NewLibSVMReader returns a Source over the libsvm text r; name identifies it
// in errors.
func NewLibSVMReader(r io.Reader, name string, opts SparseOptions) (*LibSVMReader, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &LibSVMReader{r: bufio.NewReaderSize(r, 64<<10), maxLine: maxLibSVMLine, name: name, opts: opts}, nil
}

// errLineTooLong is readLine's error for a line over the limit.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its line ending (valid until the
// next call), or io.EOF after the last. A line longer than maxLine is
// errLineTooLong, read past and not kept, so that the next call returns
// the line after it.
func (l *LibSVMReader) readLine() ([]byte, error) {
	l.buf = l.buf[:0]
	long, pieces := false, 0
	for {
		chunk, err := l.r.ReadSlice('\n')
		if err == nil && pieces == 0 && len(chunk) <= l.maxLine+2 {
			return trimEOL(chunk), nil // the whole line in one piece: no copy
		}
		pieces++
		if !long {
			if len(l.buf)+len(chunk) > l.maxLine+2 {
				long, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(l.buf) == 0 && !long:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, err
		}
		line := trimEOL(l.buf)
		if long || len(line) > l.maxLine {
			return nil, errLineTooLong
		}
		return line, nil
	}
}

// trimEOL drops a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// Next returns the next example, io.EOF at the end, or a *RecordError naming
// the file and line. With SkipCorrupt a corrupt line (an over-long one too)
// is skipped; an error reading the file is not.
func (l *LibSVMReader) Next(ctx context.Context) (Example, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Example{}, err
		}
		b, err := l.readLine()
		if err == io.EOF {
			return Example{}, io.EOF
		}
		l.line++
		ok := false
		switch {
		case errors.Is(err, errLineTooLong):
			err = fmt.Errorf("line longer than %d bytes: not libsvm text, or a line ending lost", l.maxLine)
		case err != nil:
			return Example{}, &RecordError{File: l.name, Unit: "line", Record: l.line, Err: err}
		default:
			ok, err = parseLibSVMLine(b, &l.ex, l.opts)
		}
		if err != nil {
			rerr := &RecordError{File: l.name, Unit: "line", Record: l.line, Err: err}
			if l.opts.SkipCorrupt {
				l.skipped++
				if l.opts.OnSkip != nil {
					l.opts.OnSkip(rerr)
				}
				continue
			}
			return Example{}, rerr
		}
		if ok {
			return l.ex, nil
		}
	}
}

// Skipped returns how many corrupt lines were skipped (SkipCorrupt).
func (l *LibSVMReader) Skipped() int { return l.skipped }

// Close closes the file if the reader was opened by OpenLibSVM.
func (l *LibSVMReader) Close() error {
	if l.closer == nil {
		return nil
	}
	return l.closer.Close()
}

// OpenLibSVM returns an Opener for NewFilePipeline over libsvm files.
func OpenLibSVM(opts SparseOptions) Opener {
	return func(ctx context.Context, path string) (Source, error) {
		f, err := opts.Inputs.Open(path)
		if err != nil {
			return nil, err
		}
		r, err := NewLibSVMReader(f, path, opts)
		if err != nil {
			f.Close()
			return nil, err
		}
		r.closer = f
		return r, nil
	}
}

// parseLibSVMLine parses one line into ex; false means a blank or comment
// line.
func parseLibSVMLine(line []byte, ex *Example, opts SparseOptions) (bool, error) {
	if c := bytes.IndexByte(line, '#'); c >= 0 {
		line = line[:c]
	}
	ex.Features = nil
	ex.Indices, ex.Values = ex.Indices[:0], ex.Values[:0]
	tok, rest := nextField(line)
	if len(tok) == 0 {
		return false, nil
	}
	label, err := strconv.ParseFloat(string(tok), 32)
	if err != nil || (label != 1 && label != -1 && label != 0) {
		return false, fmt.Errorf("label %q: want -1/+1 or 0/1", tok)
	}
	ex.Label = float32(label)
	base := int64(1)
	if opts.ZeroBased {
		base = 0
	}
	for {
		tok, rest = nextField(rest)
		if len(tok) == 0 {
			break
		}
		colon := bytes.IndexByte(tok, ':')
		if colon < 0 {
			return false, fmt.Errorf("token %q: want index:value", tok)
		}
		if string(tok[:colon]) == "qid" {
			continue
		}
		i, ok := parseIndex(tok[:colon])
		if !ok {
			return false, fmt.Errorf("token %q: index is not a non-negative integer", tok)
		}
		if i-base < 0 || i-base >= int64(opts.Dim) {
			return false, fmt.Errorf("index %d is outside [%d, %d] (%s); pass the right --features, or the 0-based option if the file counts from 0", i, base, int64(opts.Dim)-1+base, baseName(base))
		}
		var v float64
		if vs := tok[colon+1:]; len(vs) == 1 && vs[0] == '1' {
			v = 1 // one-hot files are mostly "i:1"
		} else {
			var err error
			v, err = strconv.ParseFloat(string(vs), 32)
			if errors.Is(err, strconv.ErrRange) {
				return false, fmt.Errorf("token %q: value is outside float32's range", tok)
			}
			if err != nil {
				return false, fmt.Errorf("token %q: value is not a number", tok)
			}
		}
		ex.Indices = append(ex.Indices, int32(i-base))
		ex.Values = append(ex.Values, float32(v))
	}
	if len(ex.Indices) == 0 {
		ex.Indices, ex.Values = nil, nil
		return true, nil
	}
	return true, finishSparse(ex, opts.Dim, int32(base))
}

// parseIndex parses a decimal index of at most 18 digits (no sign), without
// the allocation and generality of strconv.
func parseIndex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var x int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		x = x*10 + int64(c-'0')
	}
	return x, true
}

func baseName(base int64) string {
	if base == 0 {
		return "0-based"
	}
	return "1-based"
}

// nextField splits off the first whitespace-separated field of b.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	return b[i:j], b[j:]
}

// LibSVMWriter writes sparse examples as libsvm text lines.
type LibSVMWriter struct {
	w         io.Writer
	zeroBased bool
	buf       []byte
}

// NewLibSVMWriter returns a writer onto w (wrap files in a bufio.Writer);
// indices are written 1-based unless zeroBased.
func NewLibSVMWriter(w io.Writer, zeroBased bool) *LibSVMWriter {
	return &LibSVMWriter{w: w, zeroBased: zeroBased}
}

// Write writes one sparse example as a line; labels are written as -1/+1
// (0 becomes -1), values in the shortest form that reads back exactly.
func (l *LibSVMWriter) Write(ex Example) error {
	if len(ex.Indices) != len(ex.Values) {
		return fmt.Errorf("libsvm: example has %d indices but %d values", len(ex.Indices), len(ex.Values))
	}
	b := l.buf[:0]
	if ex.Label > 0 {
		b = append(b, "+1"...)
	} else {
		b = append(b, "-1"...)
	}
	base := int64(1)
	if l.zeroBased {
		base = 0
	}
	for k, i := range ex.Indices {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(i)+base, 10)
		b = append(b, ':')
		if v := ex.Values[k]; v == 1 {
			b = append(b, '1')
		} else {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("libsvm: value %v of feature %d is not finite", v, i)
			}
			b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
		}
	}
	b = append(b, '\n')
	l.buf = b
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("libsvm: write: %w", err)
	}
	return nil
}
