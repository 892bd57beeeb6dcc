package mux

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestUnreadStreamHoldsBaseWindow: until a stream's first Read, its peer
// can make this side hold only baseWindow of it, whatever the window; the
// first Read grants the rest.
func TestUnreadStreamHoldsBaseWindow(t *testing.T) {
	a, b := muxPair(t, Config{Window: 16 << 20})
	s, r := open(t, a, b)
	_ = s.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := s.Write(make([]byte, 4<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != baseWindow {
		t.Fatalf("writing 4 MiB to a stream nobody has read: wrote %d, %v; want %d and a deadline error", n, err, baseWindow)
	}
	if _, err := r.Read(make([]byte, 1)); err != nil { // the first Read: the whole window
		t.Fatal(err)
	}
	_ = s.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if n, err := s.Write(make([]byte, 8<<20)); n != 8<<20 || err != nil {
		t.Fatalf("after the first Read, 8 MiB of a 16 MiB window: wrote %d, %v", n, err)
	}
}

// TestStrangerCannotFillUnreadStreams: a peer that ignores its credit on
// streams nobody reads is stopped at baseWindow, as a protocol violation.
func TestStrangerCannotFillUnreadStreams(t *testing.T) {
	tr, _ := New(Config{Window: 64 << 20})
	raw, other := tcpPair(t)
	defer raw.Close()
	mc, _ := tr.NewConn(other, true, nil)
	c := mc.(*Conn)
	defer c.Close()
	_, _ = raw.Write(header{typ: typeWindow, flags: flagSYN, id: 1}.encode(nil))
	go func() {
		for range 2 {
			_, _ = raw.Write(header{typ: typeData, id: 1, length: 1 << 20}.encode(nil))
			_, _ = raw.Write(make([]byte, 1<<20))
		}
	}()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("a peer wrote 2 MiB into a stream nobody read without being stopped")
	}
	if err := c.connError(); !strings.Contains(err.Error(), "overran stream 1's 262144-byte window") {
		t.Fatalf("error %q does not name the overrun", err)
	}
}

// TestWriteTimeout: a peer that stops reading cannot hold a Write (or
// CloseWrite behind it) for ever: after WriteTimeout without progress the
// connection is closed and both return.
func TestWriteTimeout(t *testing.T) {
	tr, _ := New(Config{WriteTimeout: 200 * time.Millisecond})
	raw, other := tcpPair(t)
	defer raw.Close()
	mc, _ := tr.NewConn(other, true, nil)
	c := mc.(*Conn)
	defer c.Close()
	// A peer that opens a stream, grants it 1 GiB and never reads again.
	_, _ = raw.Write(header{typ: typeWindow, flags: flagSYN, id: 1, length: 1 << 30}.encode(nil))
	s, err := c.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wrote := make(chan error, 1)
	go func() { _, err := s.Write(make([]byte, 256<<20)); wrote <- err }()
	// Once the socket buffers are full the Write is stuck in a piece: no
	// progress for 50 ms (a piece to loopback takes microseconds).
	for seq := c.wseq.Load(); ; {
		time.Sleep(50 * time.Millisecond)
		now := c.wseq.Load()
		if now == seq && c.writing.Load() != nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the Write never got stuck on a peer that does not read")
		}
		seq = now
	}
	closed := make(chan error, 1)
	go func() { closed <- s.CloseWrite() }() // waits for the stuck Write
	for _, ch := range []chan error{wrote, closed} {
		select {
		case err := <-ch:
			if ch == wrote && (err == nil || !strings.Contains(err.Error(), "stopped reading")) {
				t.Fatalf("Write to a peer that stopped reading: %v; want an error that says so", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a Write or CloseWrite still waits on a peer that stopped reading %v ago", time.Since(start))
		}
	}
	if !c.IsClosed() {
		t.Fatal("the connection to a peer that stopped reading is still open")
	}
}

// slowWriter takes 8 KiB per 10 ms: a slow link (6.5 Mbit/s).
type slowWriter struct{ net.Conn }

func (c slowWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		time.Sleep(10 * time.Millisecond)
		k, err := c.Conn.Write(p[n:min(len(p), n+8<<10)])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestResetWaitsForSlowLink: a reset while a frame of the stream is being
// written over a slow link lets the frame finish (the connection carries
// on) instead of closing the connection after stallGrace.
func TestResetWaitsForSlowLink(t *testing.T) {
	tr, _ := New(Config{})
	ac, bc := tcpPair(t)
	ma, _ := tr.NewConn(slowWriter{ac}, false, nil)
	mb, _ := tr.NewConn(bc, true, nil)
	a, b := ma.(*Conn), mb.(*Conn)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	s, r := open(t, a, b)
	go func() { _, _ = r.Read(make([]byte, 1)) }() // grants the window
	ss := s.(*stream)
	eventually(t, "the window's grant", func() bool {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.credit >= 1<<20
	})
	wrote := make(chan error, 1)
	go func() { _, err := s.Write(make([]byte, 1<<20)); wrote <- err }()
	eventually(t, "the frame to be under way", func() bool { return a.writing.Load() == ss })
	start := time.Now()
	_ = s.Reset()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("a Write of a reset stream did not return")
	}
	if took := time.Since(start); took < 4*stallGrace {
		t.Fatalf("the 1 MiB frame finished %v after the reset: the link was not slow enough to test the grace", took)
	}
	if a.IsClosed() {
		t.Fatalf("a reset closed the connection while its frame still moved over a slow link: %v", a.connError())
	}
	// The connection still carries other streams.
	s2, err := a.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = s2.Write([]byte("after")); _ = s2.CloseWrite() }()
	got := make([]byte, 5)
	if _, err := r2.Read(got); err != nil || string(got) != "after" {
		t.Fatalf("a stream after the reset: %q, %v", got, err)
	}
}
