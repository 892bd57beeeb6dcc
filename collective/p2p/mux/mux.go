// Package mux is meshtrain's stream multiplexer for libp2p connections: a
// go-yamux replacement that moves a stream's bytes without copying them.
//
// go-yamux copies every body twice beyond the security layer: Write
// duplicates it into a pooled buffer for its send goroutine, and its
// receive goroutine reads it into a stream buffer that Read copies out
// of; on a large all-reduce those copies were a large share of the CPU
// (BENCHMARKS.md, "Figures behind the code": yamux's copies).
// Here Write writes the caller's bytes to the connection itself (writers
// take turns), and the connection's reader reads a frame's body straight
// into the buffer of a Read that is waiting for it ("lending"); only data
// that arrives while nobody reads is buffered, in small pooled chunks that
// stay in cache.
//
// The wire format is yamux's idea in a smaller form: a 12-byte header
// (version, type, flags, stream ID, length) per frame; data, window-update,
// reset, go-away and ping frames; odd stream IDs for the dialler, even for
// the listener; credit-based flow control per stream, every stream starting
// with baseWindow of credit each way until the receiver grants the rest of
// its window (Grant: only once the application wants the stream, so a
// stream a peer opens and fills while libp2p negotiates its protocol holds
// at most baseWindow). What a connection commits to buffer is charged to a
// budget per connection and to the peer's resource scope. SPEC.md
// describes it in full.
package mux

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"
)

// BaseWindow is the receive window of a stream until Grant (256 KiB), and
// what each stream commits of a connection's Budget until then.
const BaseWindow = 256 << 10

// ID is the protocol ID the connection upgrader negotiates. 1.1.0 added
// the accept acknowledgement and pings: a 1.0.0 peer sends neither, so the
// two must not be matched.
const ID = "/meshtrain/mux/1.1.0"

const (
	version    = 0
	headerSize = 12
	// baseWindow is every stream's credit in each direction until the
	// receiver grants the rest of its window (Grant), so a stream can carry
	// data at once; it is all a stream nobody granted can make us hold.
	baseWindow = BaseWindow
	// chunkSize is the piece in which data nobody is reading yet is
	// buffered: small, so pooled chunks come back still in cache.
	chunkSize = 64 << 10
	// smallBody is the largest body that is copied behind its header into
	// one write (a larger one is written from the caller's buffer).
	smallBody = 16 << 10
	// stallGrace bounds how long a reset, an expired deadline or a closing
	// connection waits for a read or a write under way on the connection
	// (one that holds the caller's buffer) before it closes the
	// connection: the peer stopped in the middle of a frame. A reset
	// waits longer for a frame being written: the time the frame takes
	// at slowLink.
	stallGrace = 250 * time.Millisecond
	// slowLink (bytes/s, 4 Mbit/s) is the slowest link a reset waits for
	// to take the rest of a frame before it closes the connection.
	// (Writing frames in pieces would show progress instead, but cost a
	// noticeable share of a stream's rate: BENCHMARKS.md, "Figures
	// behind the code": frames in pieces.)
	slowLink = 500_000
	// readerWait bounds how long the connection's reader waits for a
	// stream's Read to catch up before buffering what arrives for it.
	readerWait = 2 * time.Millisecond
	// acceptBacklog bounds the streams opened and not yet accepted, on
	// each side: OpenStream waits while this side has that many without
	// the peer's acknowledgement, so a peer that follows the protocol
	// never overflows our backlog; a SYN beyond it is reset. 64 streams
	// waiting hold at most 64 × baseWindow (16 MiB).
	acceptBacklog = 64
	// maxCtrl bounds the control frames waiting to be written: while more
	// wait, the connection's reader stops reading the peer's frames (which
	// provoke more), as TCP stops a sender that its receiver does not read.
	maxCtrl = 64 << 10
)

// Frame types.
const (
	typeData uint8 = iota
	typeWindow
	typeReset
	typeGoAway
	typePing
)

// Flags.
const (
	flagSYN uint16 = 1 << iota // opens the stream; on a ping, asks for the answer
	flagFIN                    // the sender will write no more
	flagACK                    // the stream was accepted; on a ping, the answer
)

// Config tunes the multiplexer; every peer of a cluster uses the same.
type Config struct {
	// Window is each stream's receive window in bytes (default 16 MiB,
	// at least 256 KiB).
	Window uint32
	// MaxFrame is the largest data frame's body (default 1 MiB): a frame
	// holds the connection while it is written, so control frames wait
	// at most this long.
	MaxFrame uint32
	// MaxStreams bounds the streams the peer may have open at once on a
	// connection (default 256); more are reset. Like yamux, this side's
	// own streams are not counted.
	MaxStreams int
	// WriteTimeout bounds every write to the connection, a whole frame of
	// up to MaxFrame (default 10 s, go-yamux's ConnectionWriteTimeout): a
	// connection whose peer does not take a frame within it is closed, so
	// no writer, CloseWrite or Close waits on a stopped peer for ever. A
	// link slower than MaxFrame per WriteTimeout (0.84 Mbit/s for 1 MiB in
	// 10 s) needs a longer one. It also bounds the wait for a ping's
	// answer (KeepAlive): the answer may wait behind one frame at the peer.
	WriteTimeout time.Duration
	// KeepAlive is how long the connection may go without a frame from
	// the peer before it sends a ping (default 30 s, go-yamux's
	// KeepAliveInterval; negative: never). If nothing arrives within
	// WriteTimeout of the ping, the peer is taken for gone and the
	// connection closed: an idle connection writes nothing, so without it
	// a peer that vanished (host down, link cut) would go unnoticed.
	KeepAlive time.Duration
	// Budget bounds the bytes a connection commits to buffer for its peer,
	// over all its streams: every stream (either side's) commits
	// baseWindow from its opening, and Window - baseWindow more once
	// granted (Grant), until it has ended and nothing it holds is unread.
	// A stream of the peer's that would take the connection over Budget
	// closes the connection, as does a Grant that would; OpenStream over
	// it fails. The peer's resource scope (NewConn's PeerScope: libp2p's
	// resource manager, whose per-peer memory limit then bounds all the
	// peer's connections together) is charged the same, and a reservation
	// it refuses ends the connection alike. Buffered bytes never exceed
	// what is committed, and take at most twice their number in memory
	// (plus one chunk per stream). Default Window + 64 × 256 KiB; at
	// least Window.
	Budget uint64
	// Logger, if set, is told why each connection ended: at Warn when the
	// reason is the multiplexer's own (the peer broke the protocol, went
	// over the budget, stopped in the middle of a frame, did not take a
	// write, fell silent), with the peer's ID and address; at Debug
	// otherwise (closed by either side, the connection lost).
	Logger *zap.Logger
}

// Transport implements network.Multiplexer.
type Transport struct{ cfg Config }

var _ network.Multiplexer = (*Transport)(nil)

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Transport, error) {
	if cfg.Window == 0 {
		cfg.Window = 16 << 20
	}
	if cfg.Window < baseWindow {
		return nil, fmt.Errorf("mux: a %d-byte stream window is below the %d-byte minimum", cfg.Window, baseWindow)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = 1 << 20
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 256
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 30 * time.Second
	}
	if cfg.Budget == 0 {
		cfg.Budget = uint64(cfg.Window) + 64*baseWindow
	}
	if cfg.Budget < uint64(cfg.Window) {
		return nil, fmt.Errorf("mux: a %d-byte connection budget is below the %d-byte stream window: no stream could be granted its window", cfg.Budget, cfg.Window)
	}
	return &Transport{cfg: cfg}, nil
}

// NewConn implements network.Multiplexer. scope (nil: none) is charged
// what the connection commits to buffer for the peer (Config.Budget).
func (t *Transport) NewConn(nc net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	return newConn(nc, isServer, t.cfg, scope), nil
}

// Conn is one multiplexed connection.
type Conn struct {
	nc  net.Conn
	br  *bufio.Reader // the reader goroutine's
	cfg Config

	// wsem is the right to write on nc. Its holder also owns ctrlSpare.
	wsem      chan struct{}
	ctrlSpare []byte
	// ctrl holds encoded control frames (window updates with SYN, ACK or
	// FIN, resets, pings) for the next writer; ctrlWake wakes the goroutine that writes them
	// when no data writer does.
	ctrlMu   sync.Mutex
	ctrl     []byte
	ctrlWake chan struct{}
	ctrlRoom chan struct{} // signalled when a writer took ctrl along
	// writing is the stream whose frame is being written, writingLen its
	// body's length, wseq counts frames written: a reset checks that a
	// write under way finishes.
	writing    atomic.Pointer[stream]
	writingLen atomic.Int64
	wseq       atomic.Uint64
	// lentBytes counts bytes read straight into a Read's buffer, pings
	// the pings sent (tests).
	lentBytes atomic.Int64
	pings     atomic.Int64

	// born is the time lastFrame counts from; lastFrame is when the last
	// frame header arrived. The keep-alive timer, under kaMu, pings when
	// it is KeepAlive old; pingAt is when (0: no ping unanswered).
	born      time.Time
	lastFrame atomic.Int64
	kaMu      sync.Mutex
	keepAlive *time.Timer
	pingAt    time.Duration

	// opening holds a place per stream this side opened that the peer has
	// not yet accepted or reset (at most acceptBacklog).
	opening chan struct{}

	// bmu guards the budget: committed is what the connection committed
	// to buffer for the peer (Config.Budget), the same reserved in scope
	// (nil: none); spent says that the connection ended and gave it all
	// back.
	bmu       sync.Mutex
	committed uint64
	scope     network.PeerScope
	spent     bool
	// peer names the peer in log lines (from scope; empty without one).
	peer peer.ID

	mu         sync.Mutex
	streams    map[uint32]*stream
	nextID     uint32
	inbound    int                 // streams the peer opened that are still in streams
	unaccepted map[uint32]struct{} // this side's streams that hold a place in opening
	pending    []*stream           // the peer's streams waiting for AcceptStream
	err        error               // why the connection ended
	done       chan struct{}
	// acceptWake is signalled when pending grows (or is left non-empty).
	acceptWake chan struct{}
	once       sync.Once
}

var _ network.MuxedConn = (*Conn)(nil)

func newConn(nc net.Conn, isServer bool, cfg Config, scope network.PeerScope) *Conn {
	c := &Conn{
		nc: nc, br: bufio.NewReaderSize(nc, 4<<10), cfg: cfg, scope: scope,
		wsem: make(chan struct{}, 1), ctrlWake: make(chan struct{}, 1), ctrlRoom: make(chan struct{}, 1),
		streams: map[uint32]*stream{}, nextID: 1, unaccepted: map[uint32]struct{}{},
		opening: make(chan struct{}, acceptBacklog),
		done:    make(chan struct{}), acceptWake: make(chan struct{}, 1),
		born: time.Now(),
	}
	if isServer {
		c.nextID = 2
	}
	if scope != nil && cfg.Logger != nil {
		c.peer = scope.Peer()
	}
	if cfg.KeepAlive > 0 {
		c.kaMu.Lock()
		c.keepAlive = time.AfterFunc(cfg.KeepAlive, c.checkAlive)
		c.kaMu.Unlock()
	}
	go c.readLoop()
	go c.ctrlLoop()
	return c
}

// header is a decoded frame header.
type header struct {
	typ    uint8
	flags  uint16
	id     uint32
	length uint32
}

func (h header) encode(b []byte) []byte {
	return append(b, version, h.typ, byte(h.flags>>8), byte(h.flags),
		byte(h.id>>24), byte(h.id>>16), byte(h.id>>8), byte(h.id),
		byte(h.length>>24), byte(h.length>>16), byte(h.length>>8), byte(h.length))
}

func decodeHeader(b []byte) (header, error) {
	if b[0] != version {
		return header{}, ownf("mux: frame of version %d, want %d: the peer runs another meshtrain version", b[0], version)
	}
	return header{typ: b[1], flags: binary.BigEndian.Uint16(b[2:]), id: binary.BigEndian.Uint32(b[4:]), length: binary.BigEndian.Uint32(b[8:])}, nil
}

// OpenStream implements network.MuxedConn. It waits (within ctx) while
// acceptBacklog streams of this side wait for the peer to accept them, and
// fails if the stream's baseWindow would take the connection over its
// budget. The stream's receive window is baseWindow until Grant.
func (c *Conn) OpenStream(ctx context.Context) (network.MuxedStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case c.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.connError()
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		<-c.opening
		return nil, c.connError()
	}
	if err := c.commit(baseWindow); err != nil {
		c.mu.Unlock()
		<-c.opening
		return nil, fmt.Errorf("mux: opening a stream: %w (%w)", err, network.ErrResourceLimitExceeded)
	}
	id := c.nextID
	c.nextID += 2
	s := newStream(c, id)
	c.streams[id] = s
	c.unaccepted[id] = struct{}{}
	c.mu.Unlock()
	c.queue(header{typ: typeWindow, flags: flagSYN, id: id})
	return s, nil
}

// settled frees the backlog place of this side's stream id: the peer
// accepted or reset it, or this side reset it (after queueing the reset,
// which the peer then reads before the SYN the place goes to).
func (c *Conn) settled(id uint32) {
	c.mu.Lock()
	_, ok := c.unaccepted[id]
	delete(c.unaccepted, id)
	c.mu.Unlock()
	if ok {
		<-c.opening
	}
}

// AcceptStream implements network.MuxedConn. Accepting acknowledges the
// stream (freeing its place in the peer's backlog); the rest of its window
// comes with Grant, once the application wants the stream (libp2p accepts
// every stream at once, and its protocol negotiation reads it).
func (c *Conn) AcceptStream() (network.MuxedStream, error) {
	for {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return nil, c.connError()
		}
		if len(c.pending) > 0 {
			s := c.pending[0]
			c.pending[0] = nil
			c.pending = c.pending[1:]
			more := len(c.pending) > 0
			c.mu.Unlock()
			if more {
				signal(c.acceptWake) // for another AcceptStream waiting
			}
			c.queue(header{typ: typeWindow, flags: flagACK, id: s.id})
			return s, nil
		}
		c.mu.Unlock()
		select {
		case <-c.acceptWake:
		case <-c.done:
			return nil, c.connError()
		}
	}
}

// Close implements network.MuxedConn.
func (c *Conn) Close() error { return c.CloseWithError(network.ConnNoError) }

// CloseWithError implements network.MuxedConn: it tells the peer why
// (briefly waiting for a writer to finish) and closes the connection.
func (c *Conn) CloseWithError(code network.ConnErrorCode) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	select {
	case c.wsem <- struct{}{}:
		// The control frames queued before it go first: a stream closed
		// just before the connection ends with EOF at the peer.
		_ = c.writeLocked(header{typ: typeGoAway, length: uint32(code)}.encode(nil), nil, stallGrace)
		<-c.wsem
	case <-time.After(stallGrace):
	}
	c.fail(&network.ConnError{ErrorCode: code})
	return nil
}

// IsClosed implements network.MuxedConn.
func (c *Conn) IsClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// As implements network.MuxedConn: a **Conn target gets c (through
// libp2p's network.Conn.As too), for Committed and Buffered.
func (c *Conn) As(target any) bool {
	if p, ok := target.(**Conn); ok {
		*p = c
		return true
	}
	return false
}

// Committed is what the connection has committed to buffer for the peer
// (Config.Budget): baseWindow per stream, Window per granted one.
func (c *Conn) Committed() uint64 {
	c.bmu.Lock()
	defer c.bmu.Unlock()
	return c.committed
}

// Buffered is the bytes the connection holds that the peer sent and the
// application has not read yet (never more than Committed).
func (c *Conn) Buffered() int {
	c.mu.Lock()
	streams := make([]*stream, 0, len(c.streams))
	for _, s := range c.streams {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	n := 0
	for _, s := range streams {
		s.mu.Lock()
		n += s.bufLen
		s.mu.Unlock()
	}
	return n
}

// commit takes n bytes of the budget and reserves them in the peer's
// scope.
func (c *Conn) commit(n uint64) error {
	c.bmu.Lock()
	defer c.bmu.Unlock()
	if c.spent {
		return net.ErrClosed
	}
	if c.committed+n > c.cfg.Budget {
		return fmt.Errorf("the connection's streams would hold %d bytes, over its %d-byte budget", c.committed+n, c.cfg.Budget)
	}
	if c.scope != nil {
		if err := c.scope.ReserveMemory(int(n), network.ReservationPriorityAlways); err != nil {
			return fmt.Errorf("the peer's memory limit refused %d bytes more (this connection holds %d): %w", n, c.committed, err)
		}
	}
	c.committed += n
	return nil
}

// uncommit gives n bytes of the budget back.
func (c *Conn) uncommit(n uint64) {
	c.bmu.Lock()
	defer c.bmu.Unlock()
	if c.spent || n == 0 {
		return
	}
	c.committed -= n
	if c.scope != nil {
		c.scope.ReleaseMemory(int(n))
	}
}

// fail ends the connection (once), wakes every stream, gives the whole
// budget back and logs why.
func (c *Conn) fail(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		streams := make([]*stream, 0, len(c.streams))
		for _, s := range c.streams {
			streams = append(streams, s)
		}
		c.mu.Unlock()
		c.logEnd(err) // before done: whoever waits for the end finds it logged
		c.bmu.Lock()
		if c.scope != nil && c.committed > 0 {
			c.scope.ReleaseMemory(int(c.committed))
		}
		c.committed, c.spent = 0, true
		c.bmu.Unlock()
		close(c.done)
		c.kaMu.Lock()
		if c.keepAlive != nil {
			c.keepAlive.Stop()
		}
		c.kaMu.Unlock()
		_ = c.nc.Close()
		for _, s := range streams {
			s.wakeAll()
		}
	})
}

// ownError is a reason of the multiplexer's own for ending a connection:
// the peer broke the protocol, went over a limit, stopped mid-frame, did
// not take a write or fell silent.
type ownError struct{ err error }

func (e ownError) Error() string { return e.err.Error() }
func (e ownError) Unwrap() error { return e.err }

func own(err error) error { return ownError{err} }

func ownf(format string, args ...any) error { return ownError{fmt.Errorf(format, args...)} }

// logEnd tells Config.Logger why the connection ended.
func (c *Conn) logEnd(err error) {
	log := c.cfg.Logger
	if log == nil {
		return
	}
	fields := []zap.Field{zap.Error(err)}
	if c.peer != "" {
		fields = append(fields, zap.Stringer("peer", c.peer))
	}
	if a := c.nc.RemoteAddr(); a != nil {
		fields = append(fields, zap.String("addr", a.String()))
	}
	if errors.As(err, new(ownError)) {
		log.Warn("mux: closed the connection", fields...)
		return
	}
	log.Debug("mux: connection ended", fields...)
}

// connError is the error stream operations return once the connection
// ended.
func (c *Conn) connError() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	var ce *network.ConnError
	if errors.As(err, &ce) {
		return &network.StreamError{ErrorCode: network.StreamErrorCode(ce.ErrorCode), Remote: ce.Remote, TransportError: err}
	}
	return &network.StreamError{TransportError: fmt.Errorf("mux: connection closed: %w", err)}
}
