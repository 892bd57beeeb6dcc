package gossip

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"unsafe"
)

func TestWireRoundTrip(t *testing.T) {
	counts := []uint64{3, 0, math.MaxUint64}
	for _, c := range []struct {
		name string
		m    message
	}{
		{"dense request", message{kind: msgRequest, id: 1, vals: []float32{1, -2, 3.5, 0, 0, 0, 0, float32(math.Inf(1))}}},
		{"dense reply with figures", message{kind: msgReply, id: 7, dist2: 2.5, norm2: math.SmallestNonzeroFloat64, vals: make([]float32, 8)}},
		{"sparse reply", message{kind: msgReply, id: math.MaxUint32, sparse: true, dist2: 1, norm2: 1, idx: []int32{1, 7}, vals: []float32{1, 2}}},
		{"sparse request of nothing", message{kind: msgRequest, id: 2, sparse: true, idx: []int32{}}},
		{"busy with stop", message{kind: msgBusy, id: 3, stop: true}},
		{"stop", message{kind: msgStop, stop: true}},
		{"stop asked by rank 2", message{kind: msgStop, stop: true, asker: 3}},
		{"empty final", message{kind: msgFinal}},
		{"dense final", message{kind: msgFinal, vals: []float32{9, 8, 7, 6, 5, 4, 3, 2}}},
		{"NaN distance", message{kind: msgReply, dist2: math.NaN(), vals: make([]float32, 8)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.m.counts = counts
			b := c.m.encode()
			got, err := decode(b, len(counts), 8)
			if err != nil {
				t.Fatal(err)
			}
			if again := got.encode(); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs:\n got  %x\n want %x", again, b)
			}
			if math.IsNaN(c.m.dist2) {
				got.dist2, c.m.dist2 = 0, 0 // NaN ≠ NaN; the bytes matched above
			}
			if got.vals == nil && len(c.m.vals) == 0 {
				got.vals = c.m.vals
			}
			if !reflect.DeepEqual(got, c.m) {
				t.Errorf("decoded %+v, want %+v", got, c.m)
			}
		})
	}
}

func TestWireRejects(t *testing.T) {
	good := (&message{kind: msgReply, id: 2, sparse: true, counts: make([]uint64, 3), idx: []int32{1}, vals: []float32{1}}).encode()
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", good[:headerSize]},
		{"counts cut", good[:headerSize+8*3]},
		{"kind 0", mod(func(b []byte) []byte { b[0] = 0; return b })},
		{"kind 6", mod(func(b []byte) []byte { b[0] = 6; return b })},
		{"unknown flag", mod(func(b []byte) []byte { b[1] |= 4; return b })},
		{"asker without stop", mod(func(b []byte) []byte { b[2] = 1; return b })},
		{"asker beyond the ranks", mod(func(b []byte) []byte { b[1] |= flagStop; b[2] = 4; return b })},
		{"asker's high byte", mod(func(b []byte) []byte { b[1] |= flagStop; b[3] = 1; return b })},
		{"truncated element", good[:len(good)-1]},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"huge count", mod(func(b []byte) []byte { b[headerSize+8*3+3] = 0xff; return b })},
		{"more elements than the model", (&message{kind: msgFinal, counts: make([]uint64, 3), vals: make([]float32, 9)}).encode()},
	} {
		if m, err := decode(c.b, 3, 8); err == nil {
			t.Errorf("%s: decoded %+v, want an error", c.name, m)
		}
	}
}

func TestWireEncodePanicsOnShapeMismatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("sparse message with 2 indices and 1 value encoded")
		}
	}()
	(&message{kind: msgReply, sparse: true, idx: []int32{1, 2}, vals: []float32{1}}).encode()
}

// FuzzDecode: decoding never panics, never returns more than the model's
// elements or other than one count per rank, and whatever it accepts
// re-encodes to the same bytes (so nothing is silently ignored).
func FuzzDecode(f *testing.F) {
	counts := make([]uint64, 3)
	f.Add((&message{kind: msgRequest, id: 1, counts: counts, vals: make([]float32, 8)}).encode())
	f.Add((&message{kind: msgReply, id: 2, dist2: 1, norm2: 1, sparse: true, counts: counts, idx: []int32{1, 7}, vals: []float32{1, 2}}).encode())
	f.Add((&message{kind: msgFinal, counts: counts}).encode())
	f.Add((&message{kind: msgBusy, stop: true, counts: counts}).encode())
	f.Add((&message{kind: msgStop, stop: true, asker: 2, counts: counts}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b, 3, 8)
		if err != nil {
			return
		}
		if len(m.vals) > 8 || len(m.idx) > len(m.vals) || len(m.counts) != 3 {
			t.Fatalf("decoded %d values, %d indices, %d counts", len(m.vals), len(m.idx), len(m.counts))
		}
		if m.kind < msgRequest || m.kind > msgFinal {
			t.Fatalf("kind %d accepted", m.kind)
		}
		if m.sparse && len(m.idx) != len(m.vals) {
			t.Fatalf("sparse message with %d indices and %d values", len(m.idx), len(m.vals))
		}
		if again := m.encode(); !bytes.Equal(again, b) {
			t.Fatalf("accepted %x but re-encodes as %x", b, again)
		}
	})
}

// TestDecodeViewsInPlace: decode leaves a message's elements where they
// arrived (no copy of the vector) when the buffer is aligned, as Recv's
// are, and copies them, intact, when it is not.
func TestDecodeViewsInPlace(t *testing.T) {
	m := message{kind: msgReply, id: 4, sparse: true, counts: []uint64{1, 2}, idx: []int32{5, 9, 11}, vals: []float32{0.5, -1, 3}}
	enc := m.encode()
	within := func(b []byte, p *float32) bool {
		a := uintptr(unsafe.Pointer(p))
		return a >= uintptr(unsafe.Pointer(&b[0])) && a < uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b))
	}
	got, err := decode(enc, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	if !within(enc, &got.vals[0]) || !reflect.DeepEqual(got.idx, m.idx) || !reflect.DeepEqual(got.vals, m.vals) {
		t.Fatalf("aligned buffer: decoded %+v (values in the buffer: %v)", got, within(enc, &got.vals[0]))
	}
	odd := make([]byte, len(enc)+1)[1:] // never 4-byte aligned
	copy(odd, enc)
	got, err = decode(odd, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	if within(odd, &got.vals[0]) || !reflect.DeepEqual(got.idx, m.idx) || !reflect.DeepEqual(got.vals, m.vals) {
		t.Fatalf("misaligned buffer: decoded %+v (values in the buffer: %v)", got, within(odd, &got.vals[0]))
	}
}
