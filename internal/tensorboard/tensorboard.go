package tensorboard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/meshtrain/meshtrain/data/tfrecord"
	"google.golang.org/protobuf/encoding/protowire"
)

// FileVersion is the file_version of the first event of every file.
const FileVersion = "brain.Event:2"

// Field numbers of the Event, Summary and Summary.Value messages.
const (
	eventWallTime    = 1
	eventStep        = 2
	eventFileVersion = 3
	eventSummary     = 5
	summaryValue     = 1
	valueTag         = 1
	valueSimple      = 2
)

// WorkerDir is the directory of one worker's event files under logdir.
func WorkerDir(logdir string, rank int) string {
	return filepath.Join(logdir, fmt.Sprintf("worker-%d", rank))
}

// Writer appends scalar summaries to one event file. It is not safe for
// concurrent use.
type Writer struct {
	path string
	f    *os.File
	bw   *bufio.Writer
	rec  *tfrecord.Writer
	buf  []byte // the event being encoded, reused
}

// fileSeq numbers the event files this process creates, so that two
// writers created in the same second (a restart, two runs of one
// directory) get different names, as TensorFlow's do.
var fileSeq atomic.Uint64

// Create makes dir (and parents) and a new event file in it named as
// TensorFlow names them: events.out.tfevents.<seconds>.<host>.<pid>.<seq>.v2,
// unique per process and per writer; and writes the file_version event.
func Create(dir string, now time.Time) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: log directory: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.ReplaceAll(host, string(filepath.Separator), "_")
	path := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d.%d.v2", now.Unix(), host, os.Getpid(), fileSeq.Add(1)))
	// O_EXCL: never append to another writer's file.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: event file: %w", err)
	}
	w := &Writer{path: path, f: f, bw: bufio.NewWriter(f)}
	w.rec = tfrecord.NewWriter(w.bw)
	b := protowire.AppendTag(nil, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallTime(now)))
	b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
	b = protowire.AppendString(b, FileVersion)
	if err := w.rec.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("tensorboard: %s: %w", path, err)
	}
	return w, w.Flush()
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// wallTime is seconds since the epoch; whole seconds and the fraction are
// converted separately so that exact times stay exact.
func wallTime(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

// Scalar records value under tag at step, stamped with wall. It is
// buffered until Flush or Close.
func (w *Writer) Scalar(tag string, step int64, value float32, wall time.Time) error {
	var val []byte
	val = protowire.AppendTag(val, valueTag, protowire.BytesType)
	val = protowire.AppendString(val, tag)
	val = protowire.AppendTag(val, valueSimple, protowire.Fixed32Type)
	val = protowire.AppendFixed32(val, math.Float32bits(value))
	sumLen := protowire.SizeTag(summaryValue) + protowire.SizeBytes(len(val))

	b := w.buf[:0]
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallTime(wall)))
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(step))
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sumLen))
	b = protowire.AppendTag(b, summaryValue, protowire.BytesType)
	b = protowire.AppendBytes(b, val)
	w.buf = b
	if err := w.rec.Write(b); err != nil {
		return fmt.Errorf("tensorboard: %s: %w", w.path, err)
	}
	return nil
}

// Flush writes buffered events to the file, so TensorBoard sees them.
func (w *Writer) Flush() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("tensorboard: %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	return errors.Join(w.Flush(), w.f.Close())
}

// Event is a decoded event: the file-version event or one scalar.
type Event struct {
	WallTime    float64
	Step        int64
	FileVersion string
	Values      []Value
}

// Value is one scalar of a summary.
type Value struct {
	Tag   string
	Value float32
}

// ReadFile decodes every event of an event file, checking each record's
// CRCs; a corrupt record or malformed event is an error naming the file
// and the record.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	defer f.Close()
	r := tfrecord.NewReader(f, path)
	var events []Event
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(rec)
		if err != nil {
			return nil, fmt.Errorf("tensorboard: %s: record %d: %w", path, r.Record(), err)
		}
		events = append(events, ev)
	}
}

// fields walks the fields of one message, calling f with each field's
// number, type and value bytes (for varints and fixed values, the raw
// encoding is decoded by f's caller through protowire).
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, b []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		if err := f(num, typ, b[:m]); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

func decodeEvent(b []byte) (Event, error) {
	var ev Event
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			x, _ := protowire.ConsumeFixed64(v)
			ev.WallTime = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			ev.Step = int64(x)
		case num == eventFileVersion && typ == protowire.BytesType:
			s, _ := protowire.ConsumeString(v)
			ev.FileVersion = s
		case num == eventSummary && typ == protowire.BytesType:
			sum, _ := protowire.ConsumeBytes(v)
			return fields(sum, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num != summaryValue || typ != protowire.BytesType {
					return nil
				}
				vb, _ := protowire.ConsumeBytes(v)
				var val Value
				err := fields(vb, func(num protowire.Number, typ protowire.Type, v []byte) error {
					switch {
					case num == valueTag && typ == protowire.BytesType:
						val.Tag, _ = protowire.ConsumeString(v)
					case num == valueSimple && typ == protowire.Fixed32Type:
						x, _ := protowire.ConsumeFixed32(v)
						val.Value = math.Float32frombits(x)
					}
					return nil
				})
				ev.Values = append(ev.Values, val)
				return err
			})
		}
		return nil
	})
	return ev, err
}
