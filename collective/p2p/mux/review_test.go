package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// eventually waits (up to 10 s) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not waiting for one to settle
	}
}

// offered waits until a Read of s offers its buffer.
func offered(t *testing.T, s network.MuxedStream) {
	t.Helper()
	st := s.(*stream)
	eventually(t, "a Read to offer its buffer", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.post != nil
	})
}

// TestWriteDeadlineKeepsCredit: a Write whose deadline passes while it
// waits for the connection's write turn gives back the credit it took,
// so the stream can still carry a full window afterwards.
func TestWriteDeadlineKeepsCredit(t *testing.T) {
	a, b := muxPair(t, Config{Window: baseWindow, MaxFrame: baseWindow})
	s, r := open(t, a, b)
	a.wsem <- struct{}{} // another writer holds the connection
	_ = s.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := s.Write(make([]byte, baseWindow)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write while the connection is held: %d, %v; want 0 and a deadline error", n, err)
	}
	<-a.wsem
	_ = s.SetWriteDeadline(time.Now().Add(5 * time.Second))
	read := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, make([]byte, baseWindow)); read <- err }()
	if n, err := s.Write(make([]byte, baseWindow)); n != baseWindow || err != nil {
		t.Fatalf("a full window after a timed-out Write: wrote %d, %v (the credit it took was lost)", n, err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}

// TestSmallFramesBufferCompactly: bytes nobody reads yet hold memory in
// proportion to their number, not to the number of frames they came in
// (a peer sending 1-byte frames must not pin a chunk per byte).
func TestSmallFramesBufferCompactly(t *testing.T) {
	a, b := muxPair(t, Config{})
	s, r := open(t, a, b)
	const frames, size = 300, 10
	for range frames {
		if _, err := s.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	rs := r.(*stream)
	held := func() (n, capacity int) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for _, c := range rs.buf {
			capacity += cap(c)
		}
		return rs.bufLen, capacity
	}
	eventually(t, "the frames to arrive", func() bool { n, _ := held(); return n == frames*size })
	if _, capacity := held(); capacity > 2*frames*size+chunkSize {
		t.Fatalf("%d bytes in %d-byte frames hold %d bytes of chunks", frames*size, size, capacity)
	}
	got, err := io.ReadFull(r, make([]byte, frames*size))
	if err != nil || got != frames*size {
		t.Fatalf("reading the buffered bytes: %d, %v", got, err)
	}
}

// TestUnreadControlFramesBounded: control frames a peer provokes but
// never reads (here resets of the streams it opens over the limit) do not
// pile up without bound: once they fill maxCtrl the connection stops
// reading from that peer, as TCP would.
func TestUnreadControlFramesBounded(t *testing.T) {
	tr, _ := New(Config{MaxStreams: 1})
	raw, other := net.Pipe() // no buffers: our first write to raw blocks
	defer raw.Close()
	mc, _ := tr.NewConn(other, true, nil)
	c := mc.(*Conn)
	defer c.Close()
	stalls := make(chan struct{}, 1)
	go floodSYN(raw, stalls)
	full := false // the pending frames reached maxCtrl
	for deadline := time.Now().Add(20 * time.Second); ; {
		c.ctrlMu.Lock()
		pending := len(c.ctrl)
		c.ctrlMu.Unlock()
		if pending > maxCtrl+2*headerSize {
			t.Fatalf("%d bytes of control frames wait for a peer that does not read", pending)
		}
		full = full || pending >= maxCtrl
		select {
		case <-stalls:
			if full {
				return // the peer's writes stall: we stopped reading
			}
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			cerr := c.err
			c.mu.Unlock()
			t.Fatalf("after 20 s, %d bytes of control frames wait (full %v, conn err %v)", pending, full, cerr)
		}
	}
}

// floodSYN opens streams on raw until it fails, never reading, and
// reports each write that could not finish within 200 ms.
func floodSYN(raw net.Conn, stalls chan<- struct{}) {
	batch := make([]byte, 0, 1000*headerSize)
	for id := uint32(1); ; {
		batch = batch[:0]
		for range 1000 {
			batch = header{typ: typeWindow, flags: flagSYN, id: id}.encode(batch)
			id += 2
		}
		for len(batch) > 0 {
			_ = raw.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := raw.Write(batch)
			batch = batch[n:]
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				select {
				case stalls <- struct{}{}:
				default:
				}
			case err != nil:
				return
			}
		}
	}
}

// TestConnCloseSendsPendingFrames: closing the connection right after a
// stream's Close still tells the peer that the stream ended: it reads EOF
// after the data, not a connection error.
func TestConnCloseSendsPendingFrames(t *testing.T) {
	for i := range 20 {
		a, b := muxPair(t, Config{})
		s, r := open(t, a, b)
		if _, err := s.Write([]byte("last words")); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		_ = a.Close()
		if got, err := io.ReadAll(r); err != nil || string(got) != "last words" {
			t.Fatalf("try %d: the peer read %q, %v; want the data and EOF", i, got, err)
		}
	}
}

// TestMaxStreamsCountsThePeers: the limit is on streams the peer opens;
// a peer at the limit does not stop this side opening its own, and its
// next stream is reset.
func TestMaxStreamsCountsThePeers(t *testing.T) {
	a, b := muxPair(t, Config{MaxStreams: 2})
	for range 2 {
		open(t, b, a)
	}
	if _, err := a.OpenStream(context.Background()); err != nil {
		t.Fatalf("opening a stream while the peer has MaxStreams open: %v", err)
	}
	extra, err := b.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, network.ErrReset) {
		t.Fatalf("the peer's stream over the limit: %v, want a reset", err)
	}
}
