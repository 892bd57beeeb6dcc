package mux

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// fillBacklog opens acceptBacklog streams on a that b does not accept.
func fillBacklog(t *testing.T, a, b *Conn) []network.MuxedStream {
	t.Helper()
	var out []network.MuxedStream
	for range acceptBacklog {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := a.OpenStream(ctx)
		cancel()
		if err != nil {
			t.Fatalf("opening stream %d of a backlog of %d: %v", len(out)+1, acceptBacklog, err)
		}
		out = append(out, s)
	}
	eventually(t, "the backlog to fill", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == acceptBacklog
	})
	return out
}

// TestOpenWaitsForAccept: an opener with acceptBacklog streams the peer
// has not accepted waits to open another instead of having it reset, and
// opens it once the peer accepts one.
func TestOpenWaitsForAccept(t *testing.T) {
	a, b := muxPair(t, Config{})
	fillBacklog(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := a.OpenStream(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("opening a stream over a full backlog: %v, want to wait until the context ends", err)
	}
	if _, err := b.AcceptStream(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := a.OpenStream(ctx)
	if err != nil {
		t.Fatalf("opening a stream after the peer accepted one: %v", err)
	}
	// Every stream waiting was kept: all are accepted, the last one works.
	var r network.MuxedStream
	for range acceptBacklog {
		if r, err = b.AcceptStream(); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _, _ = s.Write([]byte("last")); _ = s.CloseWrite() }()
	if got, err := io.ReadAll(r); err != nil || string(got) != "last" {
		t.Fatalf("the stream opened after the wait: %q, %v", got, err)
	}
}

// TestResetFreesBacklogPlace: a stream reset before the peer accepted it
// gives up its place at both ends: its opener opens another at once, and
// the peer drops it from its backlog rather than resetting the new one.
func TestResetFreesBacklogPlace(t *testing.T) {
	a, b := muxPair(t, Config{})
	streams := fillBacklog(t, a, b)
	gone := streams[0].(*stream).id
	_ = streams[0].Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := a.OpenStream(ctx)
	if err != nil {
		t.Fatalf("opening a stream after resetting an unaccepted one: %v", err)
	}
	id := s.(*stream).id
	eventually(t, "the new stream to reach the backlog", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.streams[id] != nil
	})
	for range acceptBacklog {
		r, err := b.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		if r.(*stream).id == gone {
			t.Fatal("AcceptStream returned a stream its opener had reset")
		}
	}
	_ = s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stream opened in the freed place: %v, want it alive", err)
	}
}

// TestBacklogOverflowResets: a peer that opens streams without waiting
// for acknowledgements has those over the backlog reset.
func TestBacklogOverflowResets(t *testing.T) {
	tr, _ := New(Config{})
	raw, other := tcpPair(t)
	defer raw.Close()
	c, _ := tr.NewConn(other, true, nil)
	defer c.Close()
	var syns []byte
	for i := range acceptBacklog + 1 {
		syns = header{typ: typeWindow, flags: flagSYN, id: uint32(2*i + 1)}.encode(syns)
	}
	if _, err := raw.Write(syns); err != nil {
		t.Fatal(err)
	}
	over := uint32(2*acceptBacklog + 1)
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	for hb := make([]byte, headerSize); ; {
		if _, err := io.ReadFull(raw, hb); err != nil {
			t.Fatalf("no reset of stream %d, over the backlog: %v", over, err)
		}
		h, _ := decodeHeader(hb)
		if h.typ == typeReset {
			if h.id != over || h.length != uint32(network.StreamResourceLimitExceeded) {
				t.Fatalf("reset of stream %d with code %#x; want stream %d, code %#x", h.id, h.length, over, network.StreamResourceLimitExceeded)
			}
			return
		}
	}
}

// TestUnacceptedStreamHoldsBaseWindow: until the peer grants a stream
// its window, its opener may send only baseWindow: a peer cannot make us
// buffer more for a stream nobody took. The rest of the window comes with
// Grant.
func TestUnacceptedStreamHoldsBaseWindow(t *testing.T) {
	a, b := muxPair(t, Config{})
	s, err := a.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data := payload(3, 2*baseWindow)
	n := baseWindow
	if _, err := s.Write(data[:n]); err != nil { // the credit it has (no deadline: a loaded machine may take its time)
		t.Fatal(err)
	}
	_ = s.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	if k, err := s.Write(data[n:]); k != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing past the base window of an unaccepted stream: wrote %d, %v; want 0 and a deadline error", k, err)
	}
	r, err := b.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := Grant(r); err != nil {
		t.Fatal(err)
	}
	_ = s.SetWriteDeadline(time.Time{})
	go func() { _, _ = s.Write(data[n:]); _ = s.CloseWrite() }()
	got, err := io.ReadAll(r)
	if err != nil || len(got) != len(data) || string(got) != string(data) {
		t.Fatalf("after the accept: %d bytes, %v", len(got), err)
	}
}

// TestUnacceptedStreamWindowEnforced: a peer that ignores the credit of a
// stream nobody granted its window yet cannot make it buffer past
// baseWindow (the connection ends); once granted, the whole window is the
// peer's.
func TestUnacceptedStreamWindowEnforced(t *testing.T) {
	for _, accept := range []bool{false, true} {
		tr, _ := New(Config{})
		raw, other := tcpPair(t)
		mc, _ := tr.NewConn(other, true, nil)
		c := mc.(*Conn)
		if _, err := raw.Write(header{typ: typeWindow, flags: flagSYN, id: 1}.encode(nil)); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, raw) }() // the ACK and what follows
		var s *stream
		if accept {
			r, err := c.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			if err := Grant(r); err != nil {
				t.Fatal(err)
			}
			s = r.(*stream)
		}
		const n = 2 * baseWindow
		frame := append(header{typ: typeData, id: 1, length: n}.encode(nil), make([]byte, n)...)
		if _, err := raw.Write(frame); err != nil && accept {
			t.Fatal(err)
		}
		if accept {
			eventually(t, "the frame to arrive", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.inflight == n
			})
			if c.IsClosed() {
				t.Fatalf("an accepted stream refused %d bytes: %v", n, c.connError())
			}
		} else {
			select {
			case <-c.done:
			case <-time.After(5 * time.Second):
				t.Fatalf("an unaccepted stream took %d bytes, over its %d-byte window", n, baseWindow)
			}
			if err := c.connError(); !strings.Contains(err.Error(), "overran") {
				t.Fatalf("the error %q does not say the window was overrun", err)
			}
		}
		_ = raw.Close()
		_ = c.Close()
	}
}
