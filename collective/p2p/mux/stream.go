package mux

import (
	"errors"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

var (
	errReadClosed  = errors.New("mux: read on a stream closed for reading")
	errWriteClosed = errors.New("mux: write on a stream closed for writing")
	errStalled     = errors.New("mux: the peer stopped in the middle of a frame")
)

// stream is one multiplexed stream.
type stream struct {
	c  *Conn
	id uint32

	readMu  sync.Mutex // one Read at a time: a Read may lend its buffer
	writeMu sync.Mutex // one Write at a time: frames of two writes never interleave

	mu   sync.Mutex
	cond *sync.Cond // signalled when lending ends
	// Receive side.
	buf      [][]byte // pooled chunks not yet read; buf[0][off:] comes next
	off      int
	bufLen   int
	inflight int    // bytes received and not yet read (at most granted)
	granted  uint32 // the receive window granted to the peer: baseWindow until Grant gives Window
	unacked  uint32 // bytes read since the last window update
	held     uint64 // the connection's budget this stream holds: granted, until it is settled
	gone     bool   // the connection forgot the stream: nothing more is taken in
	post     []byte // a waiting Read's buffer, lent to the connection's reader
	postN    int    // bytes the reader put in post
	postDone bool   // the reader is done with post: Read may return postN
	lending  bool   // the reader is reading into post right now
	withdraw bool   // the Read wants post back
	behind   bool   // the reader did not catch up: buffer until it does
	lwake    chan struct{}
	eof      bool // the peer closed its side
	rclosed  bool
	resetErr error
	rdl      time.Time
	rwake    chan struct{}
	// Send side.
	credit  uint32
	wclosed bool
	wdl     time.Time
	wwake   chan struct{}
}

var _ network.MuxedStream = (*stream)(nil)

// newStream is a stream whose baseWindow the connection has committed.
func newStream(c *Conn, id uint32) *stream {
	s := &stream{c: c, id: id, credit: baseWindow, granted: baseWindow, held: baseWindow, rwake: make(chan struct{}, 1), lwake: make(chan struct{}, 1), wwake: make(chan struct{}, 1)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// waitFor waits for wake, the connection's end or the deadline.
func (s *stream) waitFor(wake chan struct{}, deadline time.Time) {
	if deadline.IsZero() {
		select {
		case <-wake:
		case <-s.c.done:
		}
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-wake:
	case <-s.c.done:
	case <-t.C:
	}
}

func expired(deadline time.Time) bool {
	return !deadline.IsZero() && !time.Now().Before(deadline)
}

func (s *stream) wakeAll() {
	signal(s.rwake)
	signal(s.wwake)
	s.cond.Broadcast()
}

// Read implements io.Reader. While it waits, its buffer is offered to the
// connection's reader, which reads the stream's next bytes straight into
// it.
func (s *stream) Read(p []byte) (int, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.resetErr != nil {
			s.reclaimLocked()
			return 0, s.resetErr
		}
		if s.post != nil && s.postDone {
			n := s.reclaimLocked()
			if n > 0 {
				s.consumedLocked(n)
				return n, nil
			}
		}
		if s.bufLen > 0 {
			s.reclaimLocked() // offered, never lent: the reader lends only with nothing buffered
			n := s.copyOutLocked(p)
			s.consumedLocked(n)
			return n, nil
		}
		var err error
		switch {
		case s.rclosed:
			err = errReadClosed
		case s.eof:
			err = io.EOF
		case s.c.IsClosed():
			err = s.c.connError()
		case len(p) == 0:
			return 0, nil
		case expired(s.rdl):
			if n := s.reclaimLocked(); n > 0 {
				s.consumedLocked(n)
				return n, nil
			}
			err = os.ErrDeadlineExceeded
		}
		if err != nil {
			s.reclaimLocked()
			return 0, err
		}
		if s.post == nil {
			s.post, s.postN = p, 0
			signal(s.lwake)
		}
		dl := s.rdl
		s.mu.Unlock()
		s.waitFor(s.rwake, dl)
		s.mu.Lock()
	}
}

// reclaimLocked takes back the buffer a Read offered, waiting for the
// connection's reader to stop reading into it (closing the connection if
// the peer stalled mid-frame), and returns how many bytes it holds.
func (s *stream) reclaimLocked() int {
	if s.post == nil {
		return 0
	}
	if s.lending {
		s.withdraw = true
		stall := time.AfterFunc(stallGrace, func() { s.c.fail(own(errStalled)) })
		for s.lending {
			s.cond.Wait()
		}
		stall.Stop()
	}
	n := s.postN
	s.post, s.postN, s.postDone, s.withdraw = nil, 0, false, false
	return n
}

func (s *stream) copyOutLocked(p []byte) int {
	n := 0
	for n < len(p) && len(s.buf) > 0 {
		k := copy(p[n:], s.buf[0][s.off:])
		n += k
		s.off += k
		if s.off == len(s.buf[0]) {
			putChunk(s.buf[0])
			s.buf[0] = nil
			s.buf = s.buf[1:]
			s.off = 0
		}
	}
	s.bufLen -= n
	if s.bufLen == 0 {
		s.behind = false
		signal(s.lwake)
		s.settleLocked()
	}
	return n
}

// settleLocked gives the stream's budget back to the connection once it is
// gone and nothing it holds is unread.
func (s *stream) settleLocked() {
	if s.gone && s.bufLen == 0 && s.held > 0 {
		s.c.uncommit(s.held)
		s.held = 0
	}
}

// consumedLocked returns credit for n bytes read, in updates of a quarter
// of the window granted (fewer frames; the sender still has three quarters
// in hand).
func (s *stream) consumedLocked(n int) {
	s.inflight -= n
	s.unacked += uint32(n)
	if s.unacked >= s.granted/4 {
		s.c.queue(header{typ: typeWindow, id: s.id, length: s.unacked})
		s.unacked = 0
	}
}

// admit accounts for an n-byte body arriving.
func (s *stream) admit(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.resetErr != nil, s.gone:
	case s.rclosed:
		if n > 0 {
			s.c.queue(header{typ: typeWindow, id: s.id, length: uint32(n)}) // dropped unread: credit back at once
		}
	case s.inflight+n > int(s.granted):
		return ownf("mux: protocol violation: the peer overran stream %d's %d-byte window", s.id, s.granted)
	default:
		s.inflight += n
	}
	return nil
}

// lend returns the part of a waiting Read's buffer the next of n bytes
// go into, or nil to buffer them; drop says the stream takes no more data.
func (s *stream) lend(n int) (p []byte, drop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resetErr != nil || s.rclosed || s.gone {
		return nil, true
	}
	if s.post == nil || s.postDone || s.withdraw || s.bufLen > 0 {
		return nil, false
	}
	s.lending = true
	p = s.post[s.postN:]
	return p[:min(len(p), n)], false
}

// awaitReader is called by the connection's reader when bytes of s
// arrive while its Read is behind by a chunk or more: it waits (briefly)
// for the Read to empty the chunks and offer its buffer, so that the rest
// lands there. A Read that does not catch up within readerWait (it may be
// waiting for something this connection has yet to bring) leaves the
// stream buffering until it does.
func (s *stream) awaitReader() (caughtUp bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bufLen == 0 || s.behind || s.resetErr != nil || s.rclosed {
		return false
	}
	deadline := time.Now().Add(readerWait)
	for s.bufLen > 0 || s.post == nil || s.postDone {
		if s.resetErr != nil || s.rclosed {
			return false
		}
		d := time.Until(deadline)
		if d <= 0 {
			s.behind = true
			return false
		}
		s.mu.Unlock()
		t := time.NewTimer(d)
		ended := false
		select {
		case <-s.lwake:
		case <-t.C:
		case <-s.c.done:
			ended = true
		}
		t.Stop()
		s.mu.Lock()
		if ended {
			return false
		}
	}
	return true
}

// lent records k bytes read into the lent buffer; the Read gets them once
// its buffer is full, the frame ended or it wants the buffer back.
func (s *stream) lent(k int, frameEnd bool) {
	s.mu.Lock()
	s.lending = false
	s.postN += k
	if frameEnd || s.postN == len(s.post) || s.withdraw {
		s.postDone = true
		signal(s.rwake)
	}
	s.mu.Unlock()
	s.cond.Broadcast()
}

// push appends a chunk nobody was waiting for. A chunk that fits in the
// last one's spare room is copied there: buffered bytes then hold at most
// twice their size in chunks, whatever the size of the frames they came
// in (a chunk per 1-byte frame would let a peer pin 64 KiB per byte).
func (s *stream) push(chunk []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resetErr != nil || s.rclosed || s.gone {
		putChunk(chunk)
		return
	}
	s.bufLen += len(chunk)
	signal(s.rwake)
	if k := len(s.buf); k > 0 && len(s.buf[k-1])+len(chunk) <= cap(s.buf[k-1]) {
		s.buf[k-1] = append(s.buf[k-1], chunk...)
		putChunk(chunk)
		return
	}
	s.buf = append(s.buf, chunk)
}

func (s *stream) remoteFIN() {
	s.mu.Lock()
	s.eof = true
	done := s.wclosed
	s.mu.Unlock()
	signal(s.rwake)
	if done {
		s.c.remove(s)
	}
}

func (s *stream) addCredit(n uint32) {
	s.mu.Lock()
	s.credit += min(n, math.MaxUint32-s.credit) // a window never exceeds 4 GiB
	s.mu.Unlock()
	signal(s.wwake)
}

// Write implements io.Writer: it writes p from the caller's buffer, in
// frames of at most MaxFrame bytes and the credit the peer gave.
func (s *stream) Write(p []byte) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if len(p) == 0 {
		_, err := s.reserve(0)
		return 0, err
	}
	total := 0
	for len(p) > 0 {
		n, err := s.reserve(len(p))
		if err != nil {
			return total, err
		}
		if err := s.c.writeData(s, p[:n]); err != nil {
			return total, err
		}
		p, total = p[n:], total+n
	}
	return total, nil
}

// reserve waits for credit and takes up to want bytes of it (want 0 only
// checks that the stream can be written).
func (s *stream) reserve(want int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := s.writeErrLocked(); err != nil {
			return 0, err
		}
		if want == 0 {
			return 0, nil
		}
		if s.credit > 0 {
			n := min(int(s.credit), want, int(s.c.cfg.MaxFrame))
			s.credit -= uint32(n)
			return n, nil
		}
		dl := s.wdl
		s.mu.Unlock()
		s.waitFor(s.wwake, dl)
		s.mu.Lock()
	}
}

func (s *stream) writeErrLocked() error {
	switch {
	case s.resetErr != nil:
		return s.resetErr
	case s.wclosed:
		return errWriteClosed
	case s.c.IsClosed():
		return s.c.connError()
	case expired(s.wdl):
		return os.ErrDeadlineExceeded
	}
	return nil
}

// acquireWrite takes the connection's write turn for s.
func (s *stream) acquireWrite() error {
	for {
		s.mu.Lock()
		err, dl := s.writeErrLocked(), s.wdl
		s.mu.Unlock()
		if err != nil {
			return err
		}
		var timeout <-chan time.Time
		var t *time.Timer
		if !dl.IsZero() {
			t = time.NewTimer(time.Until(dl))
			timeout = t.C
		}
		got := false
		select {
		case s.c.wsem <- struct{}{}:
			got = true
		case <-s.wwake:
		case <-timeout:
		case <-s.c.done:
		}
		if t != nil {
			t.Stop()
		}
		if got {
			return nil
		}
	}
}

// CloseWrite implements network.MuxedStream: the peer reads EOF after
// the data written so far.
func (s *stream) CloseWrite() error {
	s.mu.Lock()
	if err := s.resetErr; err != nil {
		s.mu.Unlock()
		return err
	}
	if s.wclosed {
		s.mu.Unlock()
		return nil
	}
	s.wclosed = true
	s.mu.Unlock()
	signal(s.wwake)
	s.writeMu.Lock() // a Write under way finishes first
	s.c.queue(header{typ: typeWindow, flags: flagFIN, id: s.id})
	s.writeMu.Unlock()
	s.mu.Lock()
	done := s.eof
	s.mu.Unlock()
	if done {
		s.c.remove(s)
	}
	return nil
}

// CloseRead implements network.MuxedStream: data still arriving is
// dropped (its credit returned, so the peer's writes do not stall).
func (s *stream) CloseRead() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rclosed || s.resetErr != nil {
		return nil
	}
	s.rclosed = true
	s.freeLocked()
	if back := uint32(s.inflight) + s.unacked; back > 0 {
		s.c.queue(header{typ: typeWindow, id: s.id, length: back})
	}
	s.inflight, s.unacked = 0, 0
	signal(s.rwake)
	signal(s.lwake)
	return nil
}

func (s *stream) freeLocked() {
	for _, b := range s.buf {
		putChunk(b)
	}
	s.buf, s.off, s.bufLen = nil, 0, 0
	s.settleLocked()
}

// Close implements io.Closer.
func (s *stream) Close() error {
	err := s.CloseWrite()
	_ = s.CloseRead()
	s.c.remove(s)
	return err
}

// Reset implements network.MuxedStream.
func (s *stream) Reset() error { return s.ResetWithError(0) }

// ResetWithError implements network.MuxedStream.
func (s *stream) ResetWithError(code network.StreamErrorCode) error {
	s.reset(&network.StreamError{ErrorCode: code}, true)
	return nil
}

// reset ends the stream both ways. A write of s under way on the
// connection has stallGrace to finish, or the connection is closed.
func (s *stream) reset(err error, local bool) {
	s.mu.Lock()
	if s.resetErr != nil {
		s.mu.Unlock()
		return
	}
	s.resetErr = err
	s.freeLocked()
	s.mu.Unlock()
	s.wakeAll()
	signal(s.lwake)
	if local {
		var code uint32
		var se *network.StreamError
		if errors.As(err, &se) {
			code = uint32(se.ErrorCode)
		}
		s.c.queue(header{typ: typeReset, id: s.id, length: code})
		s.c.settled(s.id)
	}
	s.c.remove(s)
	if s.c.writing.Load() == s {
		// The frame under way gets the time it takes on a slow link.
		seq := s.c.wseq.Load()
		grace := stallGrace + time.Duration(s.c.writingLen.Load())*time.Second/slowLink
		time.AfterFunc(grace, func() {
			if s.c.writing.Load() == s && s.c.wseq.Load() == seq {
				s.c.fail(own(errStalled))
			}
		})
	}
}

// SetDeadline implements network.MuxedStream.
func (s *stream) SetDeadline(t time.Time) error {
	_ = s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

// SetReadDeadline implements network.MuxedStream. The zero time Grant
// passes grants the stream's window (and clears the deadline, as any zero
// time does).
func (s *stream) SetReadDeadline(t time.Time) error {
	if t.IsZero() && t.Location() == grantZone {
		if err := s.grant(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.rdl = t
	s.mu.Unlock()
	signal(s.rwake)
	return nil
}

// grantZone marks the zero time Grant passes to SetReadDeadline.
var grantZone = time.FixedZone("meshtrain/mux: grant the window", 0)

// Grant gives the peer the rest of stream s's receive window (Window -
// baseWindow; until then s takes at most baseWindow), once the application
// wants s: libp2p accepts every stream and negotiates its protocol by
// reading it, so granting at accept or at the first Read would let any
// stream that is opened and filled while its negotiation stalls hold a
// whole window. A window granted is charged to the connection's budget: a
// Grant that would take the connection over it closes the connection
// (logged) and returns why.
//
// s is this package's stream or any wrapper that passes SetReadDeadline
// through, as libp2p's network.Stream does (it does not expose the
// multiplexer's stream): Grant calls s.SetReadDeadline with a zero time
// this package recognises. On another multiplexer's stream it only clears
// the read deadline.
func Grant(s interface{ SetReadDeadline(time.Time) error }) error {
	return s.SetReadDeadline(time.Time{}.In(grantZone))
}

// grant gives the peer the rest of the window, once.
func (s *stream) grant() error {
	extra := s.c.cfg.Window - baseWindow
	s.mu.Lock()
	if s.granted >= s.c.cfg.Window || s.resetErr != nil || s.rclosed || s.gone {
		s.mu.Unlock()
		return nil
	}
	if err := s.c.commit(uint64(extra)); err != nil {
		s.mu.Unlock()
		err = ownf("mux: granting stream %d its %d-byte window: %w (the connection is closed)", s.id, s.c.cfg.Window, err)
		s.c.fail(err)
		return err
	}
	s.held += uint64(extra)
	s.granted = s.c.cfg.Window // before the grant leaves
	s.mu.Unlock()
	s.c.queue(header{typ: typeWindow, id: s.id, length: extra})
	return nil
}

// SetWriteDeadline implements network.MuxedStream. It bounds waiting for
// credit and for the connection; a frame already being written finishes.
func (s *stream) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	s.wdl = t
	s.mu.Unlock()
	signal(s.wwake)
	return nil
}
