package collective

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, payload := range [][]byte{nil, {1, 2, 3, 4}, bytes.Repeat([]byte{7}, smallFrame+8)} {
		h := Header{Kind: KindAllReduceRing, DType: Float32, Op: Max, Seq: 3, Count: 99, Offset: 12, Tag: 5}
		if len(payload)%4 != 0 {
			t.Fatal("test payload must be whole float32s")
		}
		var b bytes.Buffer
		if err := WriteFrame(&b, h, payload); err != nil {
			t.Fatal(err)
		}
		f, err := ReadFrame(&b, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		h.Len = uint32(len(payload))
		if f.Header != h || !bytes.Equal(f.Payload, payload) {
			t.Fatalf("got %+v, want %+v", f.Header, h)
		}
		f.Release()
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	good := make([]byte, HeaderSize)
	Header{Kind: KindBroadcast, DType: Float64, Len: 16}.Encode(good)
	for name, mut := range map[string]func(b []byte){
		"magic":    func(b []byte) { b[0] = 0 },
		"kind":     func(b []byte) { b[2] = byte(kindEnd) },
		"dtype":    func(b []byte) { b[3] = 77 },
		"op":       func(b []byte) { b[4] = 9 },
		"reserved": func(b []byte) { b[6] = 1 },
		"huge":     func(b []byte) { b[39] = 0xff },
		"partial":  func(b []byte) { b[36] = 12 }, // 12 bytes is not whole float64s
	} {
		b := bytes.Clone(good)
		mut(b)
		if _, err := decodeHeader(b, 1<<20); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := decodeHeader(good, 1<<20); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(good)
	b.Write([]byte{1, 2, 3})
	if _, err := ReadFrame(&b, 1<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated payload: %v", err)
	}
}

// FuzzDecodeFrame: no input makes the decoder panic or allocate more than
// the bound, and whatever it accepts re-encodes to the same header.
func FuzzDecodeFrame(f *testing.F) {
	var seed bytes.Buffer
	_ = WriteFrame(&seed, Header{Kind: KindAllGatherV, DType: Bytes, Count: 3}, []byte("abc"))
	f.Add(seed.Bytes())
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 16
		fr, err := ReadFrame(bytes.NewReader(data), limit)
		if err != nil {
			return
		}
		defer fr.Release()
		if int(fr.Len) > limit || len(fr.Payload) != int(fr.Len) {
			t.Fatalf("accepted %d-byte payload (len field %d) over limit %d", len(fr.Payload), fr.Len, limit)
		}
		var hb [HeaderSize]byte
		fr.Header.Encode(hb[:])
		if !bytes.Equal(hb[:], data[:HeaderSize]) {
			t.Fatalf("header does not round-trip: %x vs %x", hb, data[:HeaderSize])
		}
	})
}
