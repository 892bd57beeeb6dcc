package intrahost

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/meshtrain/meshtrain/collective"
)

// RingBytes is the shared memory of one direction of a link, fixed so that
// neither side can make the other map more: four of the ring all-reduce's
// default chunks (collective.DefaultChunkBytes) in flight, as the stream
// window lets a libp2p link have several. A peer with k co-located peers
// maps 2k rings, each shared with one peer.
const RingBytes = 4 << 20

// ringName is the memfd's name, as /proc/<pid>/maps shows it
// ("/memfd:meshtrain-ring (deleted)"): it names no file anywhere.
const ringName = "meshtrain-ring"

// ErrClosed is returned by a Send on a link Close ended.
var ErrClosed = errors.New("intrahost: link closed")

// inRing says whether a payload of n bytes travels in a ring of size
// bytes (at most half of it, so that two frames are always in flight);
// a larger one follows its header on the socket.
func inRing(n uint32, size int) bool { return n > 0 && int(n) <= size/2 }

// ringAlign is where a ring payload may start: a multiple of 8 bytes, so
// that a fold viewing it in place as float64 or float32 (unsafe.Slice)
// never makes a misaligned pointer, whatever the frames before it (a
// 16-bit gradient of odd length, a control frame).
const ringAlign = 8

// place returns where a payload of n bytes goes in a ring of size bytes
// (a multiple of ringAlign) whose cursor (bytes placed so far, wrapped
// and padding space included) is at, and the cursor after it: right after
// the previous payload, rounded up to ringAlign, or at the ring's start
// when it would not fit before the end. Sender and receiver both follow it.
func place(at uint64, n, size int) (off int, next uint64) {
	at = (at + ringAlign - 1) &^ (ringAlign - 1)
	pos := int(at % uint64(size))
	if pos+n > size {
		at += uint64(size - pos)
		pos = 0
	}
	return pos, at + uint64(n)
}

// Receiver is the reading end of a link: it owns the ring.
type Receiver struct {
	c      *net.UnixConn
	ring   []byte // read-only
	at     uint64 // ring cursor
	next   uint64 // the cursor once the frame Next returned is done
	r      bytes.Buffer
	credit [8]byte
	once   sync.Once
}

// Offer creates the link's ring, passes it to the sender on c (which
// must be authenticated) and returns the receiving end.
func Offer(c *net.UnixConn) (*Receiver, error) {
	fd, err := unix.MemfdCreate(ringName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("intrahost: creating the ring (memfd_create): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, RingBytes); err != nil {
		return nil, fmt.Errorf("intrahost: sizing the ring: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return nil, fmt.Errorf("intrahost: sealing the ring: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, RingBytes, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("intrahost: mapping the ring: %w", err)
	}
	if err := sendFD(c, fd, RingBytes); err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	return &Receiver{c: c, ring: mem}, nil
}

// Next reads the next frame's header, checked against maxFrame, and
// returns the reader of its payload: the ring, or the socket.
func (r *Receiver) Next(maxFrame uint32) (collective.Header, io.Reader, error) {
	h, err := collective.ReadHeader(r.c, maxFrame)
	if err != nil {
		return h, nil, err
	}
	if !inRing(h.Len, len(r.ring)) {
		r.next = r.at
		return h, r.c, nil
	}
	off, next := place(r.at, int(h.Len), len(r.ring))
	r.next = next
	// A bytes.Buffer over the ring is a collective.Mapped: a fold reads
	// the payload in place.
	r.r = *bytes.NewBuffer(r.ring[off : off+int(h.Len) : off+int(h.Len)])
	return h, &r.r, nil
}

// Held says whether h's payload is in the ring: the sender's Send of it
// has returned, so the reader may wait before taking it.
func (r *Receiver) Held(h collective.Header) bool { return inRing(h.Len, len(r.ring)) }

// Done gives the ring space of the frame Next returned back to the
// sender. A credit that cannot be written (the sender left) is dropped:
// the next Next reports the link's end, after any goodbye still unread.
func (r *Receiver) Done() {
	if r.next == r.at {
		return
	}
	r.at = r.next
	binary.LittleEndian.PutUint64(r.credit[:], r.at)
	_, _ = r.c.Write(r.credit[:])
}

// Reset ends the link: a Next under way fails.
func (r *Receiver) Reset() { _ = r.c.Close() }

// Unmap releases the ring; the link's reader calls it once it no longer
// reads (after Reset or a failed Next).
func (r *Receiver) Unmap() {
	r.once.Do(func() {
		_ = r.c.Close()
		_ = unix.Munmap(r.ring)
		r.ring = nil
	})
}

// Sender is the writing end of a link.
type Sender struct {
	c       *net.UnixConn
	ring    []byte
	sem     chan struct{} // one Send at a time; Close keeps it
	hb      [collective.HeaderSize]byte
	written atomic.Uint64 // ring cursor after the last payload placed
	read    atomic.Uint64 // the receiver's cursor, from its credits
	credit  chan struct{} // signalled on every credit
	gone    chan struct{} // closed when the link ended
	goneErr error
	once    sync.Once
	closing sync.Once
}

// Take receives the ring the receiver offers on c (authenticated) and
// returns the sending end. The ring must be a sealed memfd of exactly
// RingBytes: a smaller or resizable one could fault this process.
func Take(c *net.UnixConn) (*Sender, error) {
	fd, size, err := recvFD(c)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := checkRing(fd, size); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, RingBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("intrahost: mapping the peer's ring: %w", err)
	}
	s := &Sender{c: c, ring: mem, sem: make(chan struct{}, 1), credit: make(chan struct{}, 1), gone: make(chan struct{})}
	go s.credits()
	return s, nil
}

// betweenChecks, when set (tests), runs between checkRing's two checks:
// what a hostile peer that still holds the descriptor could do there.
var betweenChecks func(fd int)

// checkRing refuses a ring that is not a memfd sealed against resizing,
// of exactly RingBytes. The seals are checked first: until they are
// there, the peer can still shrink the file after its size was read, and
// this side would map pages past its end (SIGBUS on the first write).
func checkRing(fd, announced int) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return fmt.Errorf("intrahost: the peer's ring is not sealed against resizing (seals %#x, %v): refusing to map it", seals, err)
	}
	if betweenChecks != nil {
		betweenChecks(fd)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("intrahost: the ring passed: %w", err)
	}
	if announced != RingBytes || st.Size != RingBytes {
		return fmt.Errorf("intrahost: the peer's ring is %d bytes (announced %d), want %d: is it another build of meshtrain?", st.Size, announced, RingBytes)
	}
	return nil
}

// credits reads the receiver's cursor as it advances, until the link ends.
// A cursor that goes back or beyond what was sent ends the link.
func (s *Sender) credits() {
	var b [8]byte
	for {
		if _, err := io.ReadFull(s.c, b[:]); err != nil {
			s.end(fmt.Errorf("intrahost: the receiver's side ended: %w", err))
			return
		}
		v := binary.LittleEndian.Uint64(b[:])
		if v < s.read.Load() || v > s.written.Load() {
			s.end(fmt.Errorf("intrahost: the receiver says it read up to byte %d of the ring, outside [%d, %d]: a corrupt or hostile peer", v, s.read.Load(), s.written.Load()))
			return
		}
		s.read.Store(v)
		select {
		case s.credit <- struct{}{}:
		default:
		}
	}
}

func (s *Sender) end(err error) {
	s.once.Do(func() {
		s.goneErr = err
		_ = s.c.Close()
		close(s.gone)
	})
}

// Send writes one frame (h with Len set from payload; the caller checks
// the frame bound): the payload into the ring, once the receiver has made
// room, or after the header on the socket. It returns once payload may be
// reused. A ctx that ends while it waits for room leaves the link whole;
// one that ends mid-write is the caller's to handle (Reset).
func (s *Sender) Send(ctx context.Context, h collective.Header, payload []byte) error {
	select {
	case s.sem <- struct{}{}:
	case <-s.gone:
		return s.goneErr
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	if !inRing(uint32(len(payload)), len(s.ring)) {
		return collective.WriteFrame(s.c, h, payload)
	}
	off, next := place(s.written.Load(), len(payload), len(s.ring))
	for next-s.read.Load() > uint64(len(s.ring)) {
		select {
		case <-s.credit:
		case <-s.gone:
			return s.goneErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	copy(s.ring[off:], payload)
	s.written.Store(next)
	h.Len = uint32(len(payload))
	h.Encode(s.hb[:])
	_, err := s.c.Write(s.hb[:])
	return err
}

// Reset ends the link without a goodbye: a Send under way fails.
func (s *Sender) Reset() { s.end(ErrClosed) }

// CloseWrite ends the sending direction after the last frame (the
// goodbye): the receiver reads the end of the link at once. The ring stays
// mapped until Close.
func (s *Sender) CloseWrite() { _ = s.c.CloseWrite() }

// Close ends the link and, once no Send is under way, releases the ring.
func (s *Sender) Close() {
	s.end(ErrClosed)
	s.closing.Do(func() {
		s.sem <- struct{}{} // kept: every later Send sees gone
		_ = unix.Munmap(s.ring)
		s.ring = nil
	})
}
