package gossip

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Tag is the point-to-point tag of every gossip message.
const Tag uint32 = 0x60551900

// kind is a gossip message's kind, its first byte on the wire.
type kind byte

const (
	msgRequest kind = iota + 1 // initiator's parameters or changed coordinates
	msgReply                   // the pairwise average
	msgBusy                    // the responder declined this time
	msgStop                    // a rank asks everyone to stop training
	msgFinal                   // the sender finished; its final parameters
)

var kindNames = [...]string{"?", "request", "reply", "busy", "stop", "final"}

func (k kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

const (
	flagStop   = 1 << 0
	flagSparse = 1 << 1
)

// headerSize is kind, flags, the stop's asker (uint16: rank+1 of the
// lowest rank asked from outside to stop, e.g. by SIGTERM; 0 for none),
// id, distance², norm²; then
// come one uint64 step count per rank, a uint32 element count and the
// elements: float32 values (dense), or int32 indices then float32 values
// (sparse).
const headerSize = 1 + 1 + 2 + 4 + 8 + 8

// message is one gossip message. A dense message carries vals whole (a
// parameter vector, or nothing); a sparse one carries (idx, vals) pairs.
type message struct {
	kind         kind
	stop, sparse bool
	// asker is rank+1 of the lowest rank asked from outside (SIGTERM) to
	// stop, 0 if none was; only with stop.
	asker        uint16
	id           uint32 // matches a reply or busy to its request
	dist2, norm2 float64
	counts       []uint64 // the sender's step count of every rank, as last heard
	idx          []int32  // sparse only, len(idx) == len(vals)
	vals         []float32
}

// encode returns m's bytes. A sparse message whose idx and vals differ in
// length is a programmer error and panics.
func (m *message) encode() []byte {
	per := 4
	if m.sparse {
		if len(m.idx) != len(m.vals) {
			panic(fmt.Sprintf("gossip: sparse %s message with %d indices and %d values", m.kind, len(m.idx), len(m.vals)))
		}
		per = 8
	}
	b := make([]byte, headerSize+8*len(m.counts)+4+per*len(m.vals))
	b[0] = byte(m.kind)
	if m.stop {
		b[1] |= flagStop
	}
	if m.sparse {
		b[1] |= flagSparse
	}
	binary.LittleEndian.PutUint16(b[2:], m.asker)
	binary.LittleEndian.PutUint32(b[4:], m.id)
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(m.dist2))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(m.norm2))
	o := headerSize
	for _, c := range m.counts {
		binary.LittleEndian.PutUint64(b[o:], c)
		o += 8
	}
	binary.LittleEndian.PutUint32(b[o:], uint32(len(m.vals)))
	o += 4
	// Raw little-endian memory, as every collective payload (collective.New
	// refuses big-endian hosts).
	if m.sparse {
		o += copy(b[o:], sliceBytes(m.idx))
	}
	copy(b[o:], sliceBytes(m.vals))
	return b
}

// decode parses a message among ranks ranks over a model of maxElems
// parameters. It checks every length against the bytes present, and the
// element count against maxElems, before allocating, so a peer's bytes
// cannot make it allocate more than they are long. The message's
// elements share b's memory: b must not be reused while they are in use.
func decode(b []byte, ranks, maxElems int) (message, error) {
	var m message
	if need := headerSize + 8*ranks + 4; len(b) < need {
		return m, fmt.Errorf("%d-byte message is shorter than its %d-byte header", len(b), need)
	}
	m.kind = kind(b[0])
	if m.kind < msgRequest || m.kind > msgFinal {
		return m, fmt.Errorf("unknown message kind %d", b[0])
	}
	if b[1]&^(flagStop|flagSparse) != 0 {
		return m, fmt.Errorf("%s message with unknown flags %#x", m.kind, b[1])
	}
	m.stop, m.sparse = b[1]&flagStop != 0, b[1]&flagSparse != 0
	m.asker = binary.LittleEndian.Uint16(b[2:])
	if m.asker != 0 && (!m.stop || int(m.asker) > ranks) {
		return m, fmt.Errorf("%s message names rank %d as asking to stop (stop flag %v) among %d ranks", m.kind, int(m.asker)-1, m.stop, ranks)
	}
	m.id = binary.LittleEndian.Uint32(b[4:])
	m.dist2 = math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
	m.norm2 = math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
	o := headerSize
	m.counts = make([]uint64, ranks)
	for r := range m.counts {
		m.counts[r] = binary.LittleEndian.Uint64(b[o:])
		o += 8
	}
	n := int(binary.LittleEndian.Uint32(b[o:]))
	o += 4
	per := 4
	if m.sparse {
		per = 8
	}
	if rest := len(b) - o; rest != n*per || n > maxElems {
		return m, fmt.Errorf("%s message announces %d elements (%d bytes each) but carries %d bytes (model has %d parameters)", m.kind, n, per, rest, maxElems)
	}
	// The elements stay where they arrived: b is the receiver's own (a
	// fresh buffer from collective.Comm.Recv), so viewing it saves a copy
	// of the whole vector per message (two per round on its critical path).
	if m.sparse {
		m.idx = viewAs[int32](b[o : o+4*n])
		if m.idx == nil {
			m.idx = []int32{} // a sparse message has indices, if none
		}
		o += 4 * n
	}
	if n > 0 {
		m.vals = viewAs[float32](b[o : o+4*n])
	}
	return m, nil
}

// viewAs views b, whose length is a multiple of 4, as 4-byte elements:
// in place where b is 4-byte aligned (always, for buffers Go allocated
// and the offsets of this format), in a copy otherwise.
func viewAs[T int32 | float32](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	v := make([]T, len(b)/4)
	copy(sliceBytes(v), b)
	return v
}

// sliceBytes views a slice of 4-byte elements as its bytes.
func sliceBytes[T int32 | float32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
