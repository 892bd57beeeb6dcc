package mux

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestWriteTimeout: a peer that stops reading cannot hold a Write (or a
// CloseWrite behind it) for ever: a frame the peer does not take within
// WriteTimeout closes the connection, and both return.
func TestWriteTimeout(t *testing.T) {
	// One 64 MiB frame, so the Write is under way on the connection from
	// its start until the timeout.
	c := rawPeerConn(t, Config{WriteTimeout: 200 * time.Millisecond, MaxFrame: 64 << 20})
	s, err := c.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wrote := make(chan error, 1)
	go func() { _, err := s.Write(make([]byte, 64<<20)); wrote <- err }()
	eventually(t, "the Write to hold the connection", func() bool { return c.writing.Load() != nil })
	closed := make(chan error, 1)
	go func() { closed <- s.CloseWrite() }() // waits for the Write under way
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

// rawPeerConn returns the listener's side of a connection whose peer
// opened stream 1, granted it 1 GiB and never reads.
func rawPeerConn(t *testing.T, cfg Config) *Conn {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, other := tcpPair(t)
	t.Cleanup(func() { _ = raw.Close() })
	mc, err := tr.NewConn(other, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mc.(*Conn)
	t.Cleanup(func() { _ = c.Close() })
	if _, err := raw.Write(header{typ: typeWindow, flags: flagSYN, id: 1, length: 1 << 30}.encode(nil)); err != nil {
		t.Fatal(err)
	}
	return c
}

// slowWriter takes 16 KiB per 20 ms: a slow link (6.5 Mbit/s), over
// which a 1 MiB frame takes 1.3 s, within a reset's grace for it (2.35 s)
// but far beyond stallGrace.
type slowWriter struct{ net.Conn }

func (c slowWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		time.Sleep(20 * time.Millisecond) // the link's pace, not a wait for a condition
		k, err := c.Conn.Write(p[n:min(len(p), n+16<<10)])
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
	tr, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ac, bc := tcpPair(t)
	ma, _ := tr.NewConn(slowWriter{ac}, false, nil) // NewConn cannot fail
	mb, _ := tr.NewConn(bc, true, nil)
	a, b := ma.(*Conn), mb.(*Conn)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	s, r := open(t, a, b)
	if err := Grant(r); err != nil {
		t.Fatal(err)
	}
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
	if took := time.Since(start); took < 2*stallGrace {
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
