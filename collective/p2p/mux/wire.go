package mux

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// queue adds a control frame for the next writer.
func (c *Conn) queue(h header) {
	c.ctrlMu.Lock()
	c.ctrl = h.encode(c.ctrl)
	c.ctrlMu.Unlock()
	select {
	case c.ctrlWake <- struct{}{}:
	default:
	}
}

// ctrlLoop writes control frames when no data writer takes them along.
func (c *Conn) ctrlLoop() {
	for {
		select {
		case <-c.ctrlWake:
		case <-c.done:
			return
		}
		select {
		case c.wsem <- struct{}{}:
		case <-c.done:
			return
		}
		err := c.writeLocked(nil, nil, c.cfg.WriteTimeout)
		<-c.wsem
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// writeLocked writes the pending control frames, then hdr (if any) and
// body, with wsem held, each call to the connection bounded by timeout. A
// small body goes into the same write as its header; a large one is
// written from the caller's buffer.
func (c *Conn) writeLocked(hdr []byte, body []byte, timeout time.Duration) error {
	c.ctrlMu.Lock()
	b := append(c.ctrl, hdr...)
	if len(body) <= smallBody {
		b = append(b, body...)
	}
	c.ctrl = c.ctrlSpare[:0]
	c.ctrlMu.Unlock()
	c.ctrlSpare = b
	signal(c.ctrlRoom)
	if len(b) > 0 {
		if err := c.write(b, timeout); err != nil {
			return err
		}
	}
	if len(body) > smallBody {
		return c.write(body, timeout)
	}
	return nil
}

// write writes b to the connection within timeout. The deadline is
// cleared after, so that nothing else that writes to the connection (TLS
// answering a key update from the reader) finds it passed.
func (c *Conn) write(b []byte, timeout time.Duration) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(timeout))
	_, err := c.nc.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ownf("mux: the peer did not take %d bytes within %v: it stopped reading, or the link is slower than that (the connection is closed): %w", len(b), timeout, err)
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	return err
}

// writeData writes one data frame of s.
func (c *Conn) writeData(s *stream, body []byte) error {
	if err := s.acquireWrite(); err != nil {
		s.addCredit(uint32(len(body))) // reserved for a frame never written
		return err
	}
	c.writingLen.Store(int64(len(body)))
	c.writing.Store(s)
	var hb [headerSize]byte
	err := c.writeLocked(header{typ: typeData, id: s.id, length: uint32(len(body))}.encode(hb[:0]), body, c.cfg.WriteTimeout)
	c.wseq.Add(1)
	c.writing.Store(nil)
	<-c.wsem
	if err != nil {
		c.fail(err)
		return c.connError()
	}
	return nil
}

// readLoop reads frames until the connection fails.
func (c *Conn) readLoop() {
	c.fail(c.readFrames())
}

// readFrames reads frames until an error. While a frame is incomplete
// (its header or body not yet all here) the connection has a read
// deadline, WriteTimeout from the frame's first byte, the time the peer
// had to write it: a peer that stops in the middle of a frame cannot hold
// the reader for ever. Between frames there is none (keep-alive watches an
// idle connection).
func (c *Conn) readFrames() error {
	var hb [headerSize]byte
	armed := false // the read deadline is set
	arm := func(n int) {
		if !armed && c.br.Buffered() < n {
			_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.WriteTimeout))
			armed = true
		}
	}
	midFrame := func(err error) error {
		if armed && errors.Is(err, os.ErrDeadlineExceeded) {
			return ownf("mux: the peer stopped in the middle of a frame: the rest did not arrive within %v (the connection is closed): %w", c.cfg.WriteTimeout, err)
		}
		return err
	}
	for {
		if armed {
			_ = c.nc.SetReadDeadline(time.Time{})
			armed = false
		}
		if err := c.awaitCtrlRoom(); err != nil {
			return err
		}
		if _, err := c.br.Peek(1); err != nil {
			return err
		}
		arm(headerSize)
		if _, err := io.ReadFull(c.br, hb[:]); err != nil {
			return midFrame(err)
		}
		c.lastFrame.Store(int64(time.Since(c.born)))
		h, err := decodeHeader(hb[:])
		if err != nil {
			return err
		}
		switch h.typ {
		case typeData:
			if h.length > c.cfg.MaxFrame {
				return ownf("mux: the peer sent a %d-byte frame, over the %d-byte limit", h.length, c.cfg.MaxFrame)
			}
			s, err := c.streamFor(h)
			if err != nil {
				return err
			}
			arm(int(h.length))
			if err := c.receive(s, int(h.length)); err != nil {
				return midFrame(err)
			}
			if s != nil && h.flags&flagFIN != 0 {
				s.remoteFIN()
			}
		case typeWindow:
			s, err := c.streamFor(h)
			if err != nil {
				return err
			}
			if s != nil {
				s.addCredit(h.length)
				if h.flags&flagFIN != 0 {
					s.remoteFIN()
				}
			}
			if h.flags&flagACK != 0 {
				c.settled(h.id) // even if the stream has ended here since
			}
		case typeReset:
			c.mu.Lock()
			s := c.streams[h.id]
			c.mu.Unlock()
			if s != nil {
				s.reset(&network.StreamError{ErrorCode: network.StreamErrorCode(h.length), Remote: true}, false)
			}
			c.settled(h.id)
		case typeGoAway:
			return &network.ConnError{ErrorCode: network.ConnErrorCode(h.length), Remote: true}
		case typePing:
			if h.flags&flagSYN != 0 {
				c.queue(header{typ: typePing, flags: flagACK, length: h.length})
			}
			// An answer needs nothing more: its arrival set lastFrame.
		default:
			return ownf("mux: frame of unknown type %d", h.typ)
		}
	}
}

// awaitCtrlRoom holds the reader while maxCtrl bytes of control frames
// wait to be written: a peer that sends frames (each may provoke one) but
// does not read is stopped by TCP instead of growing ctrl without bound.
// A peer that reads keeps ctrl well below maxCtrl.
func (c *Conn) awaitCtrlRoom() error {
	for {
		c.ctrlMu.Lock()
		n := len(c.ctrl)
		c.ctrlMu.Unlock()
		if n < maxCtrl {
			return nil
		}
		select {
		case <-c.ctrlRoom:
		case <-c.done:
			return net.ErrClosed
		}
	}
}

// streamFor finds the stream a frame is for, creating it on SYN. Nil
// means a stream that has ended: the frame is dropped.
func (c *Conn) streamFor(h header) (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streams[h.id]; s != nil || h.flags&flagSYN == 0 {
		return s, nil
	}
	if h.id == 0 || h.id%2 == c.nextID%2 {
		return nil, ownf("mux: the peer opened stream %d, an ID that is this side's to give", h.id)
	}
	// Over the backlog only a peer that does not wait for acknowledgements.
	if c.inbound >= c.cfg.MaxStreams || len(c.pending) >= acceptBacklog {
		c.queue(header{typ: typeReset, id: h.id, length: uint32(network.StreamResourceLimitExceeded)})
		return nil, nil
	}
	if err := c.commit(baseWindow); err != nil {
		return nil, ownf("mux: the peer opened stream %d with %d of its streams open here: %w (the connection is closed)", h.id, c.inbound, err)
	}
	s := newStream(c, h.id) // the rest of its window comes with Grant
	c.streams[h.id] = s
	c.inbound++
	c.pending = append(c.pending, s)
	signal(c.acceptWake)
	return s, nil
}

// remove forgets a stream that ended both ways (or was reset: one not yet
// accepted leaves the backlog, as its opener freed its place there). Its
// budget comes back once nothing it holds is unread.
func (c *Conn) remove(s *stream) {
	c.mu.Lock()
	if c.streams[s.id] == s {
		if s.id%2 != c.nextID%2 {
			c.inbound--
			for i, p := range c.pending {
				if p == s {
					c.pending = append(c.pending[:i], c.pending[i+1:]...)
					break
				}
			}
		}
		delete(c.streams, s.id)
	}
	c.mu.Unlock()
	s.mu.Lock()
	s.gone = true
	s.settleLocked()
	s.mu.Unlock()
}

// checkAlive runs on the keep-alive timer: it pings a peer silent for
// KeepAlive, and closes the connection if nothing arrived within
// WriteTimeout of the ping.
func (c *Conn) checkAlive() {
	if err := c.keepAliveStep(); err != nil {
		c.fail(err)
	}
}

func (c *Conn) keepAliveStep() error {
	c.kaMu.Lock()
	defer c.kaMu.Unlock()
	if c.IsClosed() {
		return nil
	}
	now := time.Since(c.born)
	last := time.Duration(c.lastFrame.Load())
	switch idle := now - last; {
	case idle < c.cfg.KeepAlive:
		c.pingAt = 0
		c.keepAlive.Reset(c.cfg.KeepAlive - idle)
	case c.pingAt == 0 || last > c.pingAt:
		c.pingAt = now
		c.pings.Add(1)
		c.queue(header{typ: typePing, flags: flagSYN, length: uint32(c.pings.Load())})
		c.keepAlive.Reset(c.cfg.WriteTimeout)
	case now-c.pingAt < c.cfg.WriteTimeout:
		c.keepAlive.Reset(c.pingAt + c.cfg.WriteTimeout - now)
	default:
		return ownf("mux: the peer sent nothing for %v, not even the answer to a ping sent %v ago: it is gone or the link is down (the connection is closed)", idle.Round(time.Millisecond), c.cfg.WriteTimeout)
	}
	return nil
}

// receive reads an n-byte body for s: into a waiting Read's buffer while
// there is one, into pooled chunks otherwise, or nowhere if s ended.
func (c *Conn) receive(s *stream, n int) error {
	if s == nil {
		return c.discard(n)
	}
	if err := s.admit(n); err != nil {
		return err
	}
	for n > 0 {
		p, drop := s.lend(n)
		switch {
		case drop:
			return c.discard(n)
		case p != nil:
			k, err := c.br.Read(p)
			c.lentBytes.Add(int64(k))
			s.lent(k, k == n)
			n -= k
			if err != nil {
				return err
			}
		default:
			if s.awaitReader() {
				continue // its buffer is on offer now
			}
			chunk := getChunk(min(n, chunkSize))
			if _, err := io.ReadFull(c.br, chunk); err != nil {
				putChunk(chunk)
				return err
			}
			s.push(chunk)
			n -= len(chunk)
		}
	}
	return nil
}

func (c *Conn) discard(n int) error {
	_, err := c.br.Discard(n)
	return err
}

// chunks are pooled at chunkSize capacity.
var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

func getChunk(n int) []byte { return (*chunks.Get().(*[]byte))[:n] }

func putChunk(b []byte) {
	b = b[:cap(b)]
	chunks.Put(&b)
}
