// Package tfrecord reads and writes TFRecord framing, the container format of
// TensorFlow's record files and TensorBoard's event files.
//
// A record on disk is
//
//	uint64 length (little endian)
//	uint32 masked CRC-32C of the 8 length bytes
//	length bytes of data
//	uint32 masked CRC-32C of the data
//
// where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. The mask exists
// because CRCs of data that itself contains CRCs are weak; it is part of the
// format, not a choice of ours.
//
// A Reader never trusts a length it has not checked: the length's own CRC is
// verified before anything is allocated, and lengths above the Reader's limit
// are refused, so a corrupt or hostile file cannot exhaust memory.
package tfrecord

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// DefaultMaxRecord bounds a single record's length; TFRecord files written by
// meshtrain or TensorFlow for training data have records of kilobytes.
const DefaultMaxRecord = 256 << 20

const headerLen = 12 // uint64 length + uint32 masked CRC

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC returns the masked CRC-32C (Castagnoli) of b, as TFRecord stores it.
func MaskedCRC(b []byte) uint32 {
	crc := crc32.Checksum(b, castagnoli)
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8
}

// Writer writes TFRecord-framed records to an underlying writer. It does not
// buffer: wrap the destination in a bufio.Writer (and flush it) for many small
// records.
type Writer struct {
	w   io.Writer
	hdr [headerLen]byte
	crc [4]byte
}

// NewWriter returns a Writer that frames records onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write frames one record and writes it.
func (w *Writer) Write(record []byte) error {
	binary.LittleEndian.PutUint64(w.hdr[:8], uint64(len(record)))
	binary.LittleEndian.PutUint32(w.hdr[8:], MaskedCRC(w.hdr[:8]))
	binary.LittleEndian.PutUint32(w.crc[:], MaskedCRC(record))
	for _, b := range [][]byte{w.hdr[:], record, w.crc[:]} {
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("tfrecord: write: %w", err)
		}
	}
	return nil
}

// CorruptError reports a record that cannot be trusted: a bad CRC, an
// impossible length, or a file that ends inside a record.
type CorruptError struct {
	File   string // the name given to NewReader
	Record int    // 0-based index of the record
	Offset int64  // byte offset of the record's header in the file
	Reason string
	// Resumable is true when only the record's data failed its CRC: the
	// length was intact, so the Reader has moved past the record and the
	// next call to Next reads the one after it.
	Resumable bool
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("tfrecord: %s: record %d at byte %d: %s", e.File, e.Record, e.Offset, e.Reason)
}

// Reader reads TFRecord-framed records.
type Reader struct {
	r      *bufio.Reader
	name   string
	max    int
	record int   // index of the next record
	offset int64 // byte offset of the next record
	buf    []byte
	hdr    [headerLen]byte
}

// NewReader returns a Reader over r; name identifies the source in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), name: name, max: DefaultMaxRecord, record: 0}
}

// SetMaxRecord changes the largest record length the Reader accepts.
func (r *Reader) SetMaxRecord(n int) { r.max = n }

// Record returns the index of the record last returned by Next (-1 before the
// first).
func (r *Reader) Record() int { return r.record - 1 }

// Next returns the next record's data, valid until the following call. It
// returns io.EOF at a clean end of input and a *CorruptError for a damaged
// record. A record whose data fails its CRC but whose length was intact is
// skipped (the error is Resumable); after any other error the Reader cannot
// be resynchronised, because a corrupt length leaves no trustworthy boundary.
func (r *Reader) Next() ([]byte, error) {
	n, err := io.ReadFull(r.r, r.hdr[:])
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, r.corrupt(fmt.Sprintf("file ends inside the record header (%d of %d bytes)", n, headerLen))
	case err != nil:
		return nil, fmt.Errorf("tfrecord: %s: record %d: %w", r.name, r.record, err)
	}
	if got, want := binary.LittleEndian.Uint32(r.hdr[8:]), MaskedCRC(r.hdr[:8]); got != want {
		return nil, r.corrupt(fmt.Sprintf("length CRC mismatch (stored %#08x, computed %#08x)", got, want))
	}
	length := binary.LittleEndian.Uint64(r.hdr[:8])
	if length > uint64(r.max) {
		return nil, r.corrupt(fmt.Sprintf("length %d exceeds the limit of %d bytes", length, r.max))
	}
	need := int(length) + 4
	if cap(r.buf) < need {
		r.buf = make([]byte, need)
	}
	r.buf = r.buf[:need]
	if n, err := io.ReadFull(r.r, r.buf); err != nil {
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, r.corrupt(fmt.Sprintf("file ends inside the record: %d of %d bytes present", n, need))
		}
		return nil, fmt.Errorf("tfrecord: %s: record %d: %w", r.name, r.record, err)
	}
	data := r.buf[:length]
	if got, want := binary.LittleEndian.Uint32(r.buf[length:]), MaskedCRC(data); got != want {
		err := r.corrupt(fmt.Sprintf("data CRC mismatch (stored %#08x, computed %#08x)", got, want))
		err.Resumable = true
		r.advance(need)
		return nil, err
	}
	r.advance(need)
	return data, nil
}

func (r *Reader) advance(need int) {
	r.record++
	r.offset += int64(headerLen + need)
}

func (r *Reader) corrupt(reason string) *CorruptError {
	return &CorruptError{File: r.name, Record: r.record, Offset: r.offset, Reason: reason}
}
