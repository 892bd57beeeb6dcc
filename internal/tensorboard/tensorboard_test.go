package tensorboard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/data/tfrecord"
)

// maskedCRC is the formula, written out independently of tfrecord.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// rawRecords splits a TFRecord file by hand, checking both CRCs of every record.
func rawRecords(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var recs [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("record %d: %d trailing bytes", len(recs), len(b))
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if got, want := binary.LittleEndian.Uint32(b[8:12]), maskedCRC(b[:8]); got != want {
			t.Fatalf("record %d: length CRC %#x, want %#x", len(recs), got, want)
		}
		if uint64(len(b)) < 12+n+4 {
			t.Fatalf("record %d: truncated", len(recs))
		}
		data := b[12 : 12+n]
		if got, want := binary.LittleEndian.Uint32(b[12+n:16+n]), maskedCRC(data); got != want {
			t.Fatalf("record %d: data CRC %#x, want %#x", len(recs), got, want)
		}
		recs = append(recs, data)
		b = b[16+n:]
	}
	return recs
}

func TestWriteReadBack(t *testing.T) {
	logdir := t.TempDir()
	dir := WorkerDir(logdir, 1)
	start := time.Unix(1700000000, 250_000_000)
	w, err := Create(dir, start)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents.1700000000.") || filepath.Dir(w.Path()) != filepath.Join(logdir, "worker-1") {
		t.Fatalf("file %s: want worker-1/events.out.tfevents.1700000000.<host>", w.Path())
	}
	type scalar struct {
		tag  string
		step int64
		v    float32
	}
	want := []scalar{{"loss", 0, 2.3}, {"accuracy", 0, 0.975}, {"examples_per_s", 937, 25e3}, {"loss", 1 << 40, float32(math.Inf(1))}, {"a/b", 3, -0}}
	for i, s := range want {
		if err := w.Scalar(s.tag, s.step, s.v, start.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	recs := rawRecords(t, raw)
	if len(recs) != 1+len(want) {
		t.Fatalf("%d records, want %d", len(recs), 1+len(want))
	}
	// The first event, byte for byte: wall_time (field 1, fixed64), file_version (field 3).
	first := []byte{0x09}
	first = binary.LittleEndian.AppendUint64(first, math.Float64bits(1700000000.25))
	first = append(first, 0x1a, byte(len(FileVersion)))
	first = append(first, FileVersion...)
	if string(recs[0]) != string(first) {
		t.Fatalf("first event % x, want % x", recs[0], first)
	}
	events, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if events[0].FileVersion != FileVersion || events[0].WallTime != 1700000000.25 {
		t.Fatalf("first event %+v", events[0])
	}
	for i, s := range want {
		ev := events[i+1]
		wall := 1700000000.25 + float64(i)
		if ev.Step != s.step || ev.WallTime != wall || len(ev.Values) != 1 || ev.Values[0].Tag != s.tag ||
			math.Float32bits(ev.Values[0].Value) != math.Float32bits(s.v) {
			t.Errorf("event %d: %+v, want step %d wall %v %s=%v", i+1, ev, s.step, wall, s.tag, s.v)
		}
	}
}

// TestWorkersDoNotCollide: two workers of one run write separate files,
// and a second writer in the same directory and second (a restart) gets a
// file of its own, named as TensorFlow names them.
func TestWorkersDoNotCollide(t *testing.T) {
	logdir := t.TempDir()
	now := time.Unix(1700000001, 0)
	for rank := range 2 {
		w, err := Create(WorkerDir(logdir, rank), now)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Scalar("loss", 1, float32(rank), now); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for rank := range 2 {
		files, _ := filepath.Glob(filepath.Join(WorkerDir(logdir, rank), "events.out.tfevents.*"))
		if len(files) != 1 {
			t.Fatalf("worker %d: files %v", rank, files)
		}
		ev, err := ReadFile(files[0])
		if err != nil || len(ev) != 2 || ev[1].Values[0].Value != float32(rank) {
			t.Fatalf("worker %d: %+v %v", rank, ev, err)
		}
	}
	w, err := Create(WorkerDir(logdir, 0), now)
	if err != nil {
		t.Fatalf("second writer in the same directory and second: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(WorkerDir(logdir, 0), "events.out.tfevents.*"))
	pattern := regexp.MustCompile(fmt.Sprintf(`^events\.out\.tfevents\.1700000001\.[^.]+\.%d\.\d+\.v2$`, os.Getpid()))
	if len(files) != 2 || files[0] == files[1] {
		t.Fatalf("worker 0 after a restart: files %v, want two", files)
	}
	for _, f := range files {
		if !pattern.MatchString(filepath.Base(f)) {
			t.Errorf("file name %s: want events.out.tfevents.<seconds>.<host>.<pid>.<seq>.v2", filepath.Base(f))
		}
	}
}

func TestReadCorrupt(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, time.Unix(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	w.Scalar("loss", 1, 1, time.Unix(6, 0))
	w.Close()
	b, _ := os.ReadFile(w.Path())
	b[len(b)-6] ^= 0xff // inside the last record's data
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, b, 0o644)
	_, err = ReadFile(bad)
	var ce *tfrecord.CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("corrupt file: err = %v, want a *tfrecord.CorruptError naming the file", err)
	}
}

// FuzzDecodeEvent: any record bytes decode to an event or an error,
// never a panic; and a decoded scalar event re-encodes to the same values.
func FuzzDecodeEvent(f *testing.F) {
	dir := f.TempDir()
	w, err := Create(dir, time.Unix(9, 0))
	if err != nil {
		f.Fatal(err)
	}
	w.Scalar("loss", 3, 0.5, time.Unix(10, 0))
	w.Close()
	raw, _ := os.ReadFile(w.Path())
	r := tfrecord.NewReader(bytes.NewReader(raw), "seed")
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		f.Add(append([]byte(nil), rec...))
	}
	f.Add([]byte{0x2a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := decodeEvent(b)
		if err != nil || len(ev.Values) != 1 || ev.FileVersion != "" {
			return
		}
		// Re-encode a one-scalar event and decode it again: same values.
		w := &Writer{}
		var sink bytes.Buffer
		w.rec = tfrecord.NewWriter(&sink)
		wall := time.Unix(0, 0).Add(time.Duration(ev.WallTime * 1e9))
		if err := w.Scalar(ev.Values[0].Tag, ev.Step, ev.Values[0].Value, wall); err != nil {
			t.Fatal(err)
		}
		again, err := decodeEvent(w.buf)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if again.Step != ev.Step || again.Values[0].Tag != ev.Values[0].Tag ||
			math.Float32bits(again.Values[0].Value) != math.Float32bits(ev.Values[0].Value) {
			t.Fatalf("round trip: %+v, then %+v", ev, again)
		}
	})
}
