package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

// Kind is the operation a frame belongs to.
type Kind uint8

// Frame kinds. The two all-reduce algorithms have different kinds so that
// ranks configured with different thresholds fail loudly instead of mixing
// schedules.
const (
	KindAllReduceRing Kind = iota + 1
	KindAllReduceTree
	KindBroadcast
	KindBarrier
	KindGatherLens
	KindAllGatherV
	KindP2P   // point-to-point message with a user tag
	KindAbort // the sender's communicator failed; payload is the reason
	KindBye   // the sender closes the link on purpose
	KindAllReduceStar
	KindAllReduceHier
	kindEnd
)

var kindNames = [...]string{"invalid", "allreduce(ring)", "allreduce(tree)", "broadcast", "barrier", "allgather-lengths", "allgatherv", "p2p", "abort", "bye", "allreduce(star)", "allreduce(hierarchical)"}

func (k Kind) String() string {
	if k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// DType is the element type of a payload.
type DType uint8

// Element types.
const (
	DTypeNone DType = iota
	Float32
	Float64
	Int64
	Bytes
	// BFloat16 and Float16 are float32 gradients travelling in 16 bits
	// (AllReduceFloat32Half): a payload is a package half frame.
	BFloat16
	Float16
	dtypeEnd
)

var dtypeNames = [...]string{"none", "float32", "float64", "int64", "bytes", "bf16", "fp16"}
var dtypeSizes = [...]int{1, 4, 8, 8, 1, 2, 2}

func (d DType) String() string {
	if d < dtypeEnd {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the size of one element in bytes (1 for DTypeNone and Bytes).
func (d DType) Size() int {
	if d < dtypeEnd {
		return dtypeSizes[d]
	}
	return 1
}

// Op is a reduction operator. The zero value is Sum.
type Op int

// Reduction operators. Avg divides the sum by the world size (integer
// division, truncating toward zero, for Int64).
const (
	Sum Op = iota
	Avg
	Min
	Max
	opEnd
)

var opNames = [...]string{"sum", "avg", "min", "max"}

func (o Op) String() string {
	if o >= 0 && o < opEnd {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// HeaderSize is the size of an encoded Header.
const HeaderSize = 40

const (
	headerMagic   = 0xA7
	headerVersion = 1
)

// Header precedes every payload on the wire.
type Header struct {
	Kind   Kind
	DType  DType
	Op     Op     // reduction op (all-reduce only)
	Seq    uint64 // collective sequence number, the same on every rank
	Count  uint64 // elements in the whole operation's buffer on the sender
	Offset uint64 // element offset of this payload within that buffer
	Tag    uint32 // user tag (p2p), root (broadcast), round (barrier)
	Len    uint32 // payload bytes that follow
}

// shape describes the header for error messages.
func (h Header) shape() string {
	s := fmt.Sprintf("%s #%d %s×%d", h.Kind, h.Seq, h.DType, h.Count)
	if h.Kind == KindAllReduceRing || h.Kind == KindAllReduceTree || h.Kind == KindAllReduceStar {
		s += " (" + h.Op.String() + ")"
	}
	if h.Kind == KindAllReduceHier {
		s += fmt.Sprintf(" (%s, %s, host grouping %08x)", h.Op, hierPhase(h.Tag&3), h.Tag>>2)
	}
	return s
}

// Encode writes h into b[:HeaderSize].
func (h Header) Encode(b []byte) {
	_ = b[HeaderSize-1]
	b[0], b[1], b[2], b[3] = headerMagic, headerVersion, byte(h.Kind), byte(h.DType)
	b[4], b[5], b[6], b[7] = byte(h.Op), 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], h.Seq)
	binary.LittleEndian.PutUint64(b[16:], h.Count)
	binary.LittleEndian.PutUint64(b[24:], h.Offset)
	binary.LittleEndian.PutUint32(b[32:], h.Tag)
	binary.LittleEndian.PutUint32(b[36:], h.Len)
}

// decodeHeader parses a header and checks it before anything is allocated
// for its payload: the magic and version, that kind, dtype and op are known,
// and that Len is at most maxLen and a whole number of elements.
func decodeHeader(b []byte, maxLen uint32) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("collective: short frame header: %d of %d bytes", len(b), HeaderSize)
	}
	if b[0] != headerMagic || b[1] != headerVersion {
		return Header{}, fmt.Errorf("collective: bad frame header %#x %#x: not a meshtrain v%d frame", b[0], b[1], headerVersion)
	}
	h := Header{
		Kind:   Kind(b[2]),
		DType:  DType(b[3]),
		Op:     Op(b[4]),
		Seq:    binary.LittleEndian.Uint64(b[8:]),
		Count:  binary.LittleEndian.Uint64(b[16:]),
		Offset: binary.LittleEndian.Uint64(b[24:]),
		Tag:    binary.LittleEndian.Uint32(b[32:]),
		Len:    binary.LittleEndian.Uint32(b[36:]),
	}
	switch {
	case h.Kind == 0 || h.Kind >= kindEnd:
		return Header{}, fmt.Errorf("collective: frame of unknown kind %d", b[2])
	case h.DType >= dtypeEnd:
		return Header{}, fmt.Errorf("collective: frame of unknown dtype %d", b[3])
	case h.Op < 0 || h.Op >= opEnd || b[5]|b[6]|b[7] != 0:
		return Header{}, fmt.Errorf("collective: frame with unknown op %d or nonzero reserved bytes", b[4])
	case h.Len > maxLen:
		return Header{}, fmt.Errorf("collective: frame payload of %d bytes exceeds the %d-byte limit", h.Len, maxLen)
	case int(h.Len)%h.DType.Size() != 0:
		return Header{}, fmt.Errorf("collective: frame payload of %d bytes is not a whole number of %s", h.Len, h.DType)
	}
	return h, nil
}

// Frame is a received header and payload. The payload lives in a pooled
// buffer: call Release once done with it.
type Frame struct {
	Header
	Payload []byte
	// Landed says that the payload went straight into the buffer the
	// executor offered (see Landing); Payload is then nil.
	Landed bool
	buf    *[]byte
}

// Release returns the payload buffer to the pool. The payload must not be
// used afterwards.
func (f *Frame) Release() {
	if f.buf != nil {
		putBuf(f.buf)
		f.buf = nil
		f.Payload = nil
	}
}

// ReadFrame reads one frame from r. The payload length is checked against
// maxLen before the buffer is taken from the pool.
func ReadFrame(r io.Reader, maxLen uint32) (Frame, error) {
	h, err := ReadHeader(r, maxLen)
	if err != nil {
		return Frame{}, err
	}
	return ReadPayload(r, h)
}

// ReadHeader reads and checks one frame header from r (the payload length
// against maxLen); ReadPayload or a Landing's Fill then reads the payload.
func ReadHeader(r io.Reader, maxLen uint32) (Header, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, err
	}
	return decodeHeader(hb[:], maxLen)
}

// ReadPayload reads h's payload from r into a pooled buffer.
func ReadPayload(r io.Reader, h Header) (Frame, error) {
	f := Frame{Header: h}
	if h.Len > 0 {
		f.buf = getBuf(int(h.Len))
		f.Payload = (*f.buf)[:h.Len]
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			f.Release()
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, fmt.Errorf("collective: reading %d-byte payload of %s: %w", h.Len, h.shape(), err)
		}
	}
	return f, nil
}

// smallFrame is the payload size below which WriteFrame copies header and
// payload into one write (one multiplexer frame, one TLS record).
const smallFrame = 64 << 10

// WriteFrame writes h (with Len set from payload) and payload to w.
func WriteFrame(w io.Writer, h Header, payload []byte) error {
	h.Len = uint32(len(payload))
	if len(payload) <= smallFrame {
		bp := getBuf(HeaderSize + len(payload))
		b := (*bp)[:HeaderSize+len(payload)]
		h.Encode(b)
		copy(b[HeaderSize:], payload)
		_, err := w.Write(b)
		putBuf(bp)
		return err
	}
	var hb [HeaderSize]byte
	h.Encode(hb[:])
	if _, err := w.Write(hb[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// Payload buffers are pooled by power-of-two size class, so steady-state
// collectives allocate nothing per frame.
var bufPools [40]sync.Pool

const minBufClass = 9 // 512 bytes

func bufClass(n int) int {
	if n <= 1<<minBufClass {
		return minBufClass
	}
	return bits.Len(uint(n - 1))
}

func getBuf(n int) *[]byte {
	c := bufClass(n)
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 1<<c)
	return &b
}

func putBuf(p *[]byte) {
	c := bufClass(cap(*p))
	if cap(*p) != 1<<c {
		return
	}
	*p = (*p)[:cap(*p)]
	bufPools[c].Put(p)
}
