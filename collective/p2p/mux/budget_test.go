package mux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// rawListener returns the listener's side of a connection whose other end
// the test writes raw frames to (and reads nothing from it but discards),
// with every stream the peer opens accepted at once, as libp2p's swarm
// does (it accepts, then negotiates the protocol).
func rawListener(t *testing.T, cfg Config, scope network.PeerScope) (*Conn, func(...[]byte)) {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, other := tcpPair(t)
	t.Cleanup(func() { _ = raw.Close() })
	mc, _ := tr.NewConn(other, true, scope)
	c := mc.(*Conn)
	t.Cleanup(func() { _ = c.Close() })
	go func() { _, _ = io.Copy(io.Discard, raw) }()
	go func() {
		for {
			if _, err := c.AcceptStream(); err != nil {
				return
			}
		}
	}()
	send := func(frames ...[]byte) {
		for _, f := range frames {
			if _, err := raw.Write(f); err != nil {
				return // the connection ended: the test looks at why
			}
		}
	}
	return c, send
}

func syn(id uint32) []byte { return header{typ: typeWindow, flags: flagSYN, id: id}.encode(nil) }

func data(id uint32, n int) []byte {
	return append(header{typ: typeData, id: id, length: uint32(n)}.encode(nil), make([]byte, n)...)
}

// ended waits for c to end and returns why.
func ended(t *testing.T, c *Conn, what string) error {
	t.Helper()
	select {
	case <-c.done:
		return c.connError()
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection is still open 10 s after %s", what)
		return nil
	}
}

// TestAcceptedStreamHoldsBaseWindow (issue 24 item 2): a stream the
// application accepted but never granted (libp2p accepts every stream,
// then reads its protocol negotiation) holds at most baseWindow: a peer
// that sends more has overrun it, and the connection ends. Before, the
// whole window was granted at accept, and a stream whose negotiation
// stalled could be made to hold all of it.
func TestAcceptedStreamHoldsBaseWindow(t *testing.T) {
	c, send := rawListener(t, Config{Window: 16 << 20, MaxFrame: 1 << 20}, nil)
	send(syn(1))
	eventually(t, "the stream to be accepted", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.streams[1] != nil && len(c.pending) == 0
	})
	go send(data(1, baseWindow), data(1, 1<<20))
	if err := ended(t, c, "an accepted stream nobody granted took 1.25 MiB"); !strings.Contains(err.Error(), "overran stream 1's 262144-byte window") {
		t.Fatalf("the connection ended with %q, not saying the stream's base window was overrun", err)
	}
}

// TestGrantGivesTheWindow: a peer that follows the protocol sends
// baseWindow on an accepted stream, and the rest once it is granted (also
// through a wrapper that only passes SetReadDeadline on, as libp2p's
// stream does).
func TestGrantGivesTheWindow(t *testing.T) {
	a, b := muxPair(t, Config{Window: 4 << 20})
	s, r := open(t, a, b)
	src := payload(5, 4<<20)
	n := baseWindow
	if _, err := s.Write(src[:n]); err != nil {
		t.Fatal(err)
	}
	_ = s.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	if k, err := s.Write(src[n:]); k != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing past the base window before the grant: wrote %d, %v; want 0 and a deadline error", k, err)
	}
	if err := Grant(struct{ network.MuxedStream }{r}); err != nil {
		t.Fatal(err)
	}
	_ = s.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if k, err := s.Write(src[n:]); err != nil || k != len(src)-n {
		t.Fatalf("writing the rest of the window after the grant: wrote %d, %v (nobody read it yet)", k, err)
	}
	if got := b.Committed(); got != 4<<20 {
		t.Fatalf("committed %d bytes for one granted stream; want its 4 MiB window", got)
	}
	eventually(t, "the 4 MiB sent to be buffered, unread", func() bool { return b.Buffered() == 4<<20 })
	buf := make([]byte, len(src))
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != string(src) {
		t.Fatalf("reading the granted window: %v", err)
	}
	// The budget comes back when the stream ends both ways.
	_ = s.Close()
	_ = r.Close()
	eventually(t, "the budget to come back", func() bool { return a.Committed() == 0 && b.Committed() == 0 })
}

// scope is a PeerScope that refuses memory past limit and checks that all
// of it comes back.
type scope struct {
	network.NullScope
	mu          sync.Mutex
	held, limit int
}

func (s *scope) ReserveMemory(n int, _ uint8) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held+n > s.limit {
		return fmt.Errorf("peer scope: %d bytes held, %d more refused over its %d-byte limit: %w", s.held, n, s.limit, network.ErrResourceLimitExceeded)
	}
	s.held += n
	return nil
}

func (s *scope) ReleaseMemory(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held -= n
}

func (s *scope) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *scope) Peer() peer.ID { return "12D3KooWTestPeer" }

// TestBudget (issue 24 item 2): a peer that opens more streams than the
// connection's budget (or its scope) allows is disconnected, the reason
// logged with its ID, its address and the limit; what was committed stays
// within both, and all of it comes back.
func TestBudget(t *testing.T) {
	const window = 1 << 20
	for _, tc := range []struct {
		name   string
		budget uint64
		limit  int
		want   string
	}{
		{"connection", window + 4*baseWindow, 1 << 30, "over its 2097152-byte budget"},
		{"peer scope", 1 << 30, 3 * baseWindow, "over its 786432-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			sc := &scope{limit: tc.limit}
			c, send := rawListener(t, Config{Window: window, Budget: tc.budget, Logger: zap.New(core)}, sc)
			var frames [][]byte
			for id := uint32(1); id < 2*64; id += 2 {
				frames = append(frames, syn(id), data(id, baseWindow))
			}
			go send(frames...)
			err := ended(t, c, "the peer opened 64 streams and filled each")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the connection ended with %q, not saying %q", err, tc.want)
			}
			if held := sc.Held(); held != 0 {
				t.Fatalf("the scope still holds %d bytes after the connection ended", held)
			}
			warn := logs.FilterMessage("mux: closed the connection").FilterLevelExact(zapcore.WarnLevel).All()
			if len(warn) != 1 {
				t.Fatalf("want one warning, got %v", logs.All())
			}
			f := warn[0].ContextMap()
			if f["peer"] != sc.Peer().String() || f["addr"] == nil || !strings.Contains(fmt.Sprint(f["error"]), tc.want) {
				t.Fatalf("the warning does not name the peer, its address and the limit: %v", f)
			}
		})
	}
}

// TestBudgetHeldUntilRead: a stream that ended both ways while bytes it
// received are unread keeps their budget until they are read.
func TestBudgetHeldUntilRead(t *testing.T) {
	a, b := muxPair(t, Config{Window: 1 << 20})
	s, r := open(t, a, b)
	if _, err := s.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseWrite()
	_ = r.CloseWrite()
	rs := r.(*stream)
	eventually(t, "the stream to end both ways", func() bool {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		return rs.gone && rs.bufLen == 1000
	})
	if got := b.Committed(); got != baseWindow {
		t.Fatalf("a stream gone with 1000 bytes unread: %d committed, want its base window", got)
	}
	if got, err := io.ReadAll(r); err != nil || len(got) != 1000 {
		t.Fatalf("read %d, %v", len(got), err)
	}
	if got := b.Committed(); got != 0 {
		t.Fatalf("%d bytes still committed once all was read", got)
	}
}

// TestStalledFrameTimesOut (issue 24 item 2): a peer that stops in the
// middle of a frame, with nobody reading the stream, no longer holds the
// connection's reader for ever: the rest of the frame must arrive within
// WriteTimeout. (Keep-alive is off, to show the deadline alone ends it.)
func TestStalledFrameTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		frames [][]byte
	}{
		{"body", [][]byte{syn(1), data(1, 100<<10)[:headerSize+50<<10]}},
		{"header", [][]byte{syn(1), data(1, 10)[:5]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, send := rawListener(t, Config{WriteTimeout: timeout, KeepAlive: -1}, nil)
			start := time.Now()
			send(tc.frames...)
			err := ended(t, c, "the peer stopped mid-frame")
			if !strings.Contains(err.Error(), "stopped in the middle of a frame") {
				t.Fatalf("the connection ended with %q, not saying the peer stopped mid-frame", err)
			}
			if took := time.Since(start); took < timeout || took > timeout+2*time.Second {
				t.Fatalf("closed %v after the stall; want about %v", took, timeout)
			}
		})
	}
	// A slow but steady peer within the deadline, and an idle connection
	// longer than it, are fine.
	c, send := rawListener(t, Config{WriteTimeout: timeout, KeepAlive: -1}, nil)
	send(syn(1))
	time.Sleep(2 * timeout) // idle between frames: no deadline
	f := data(1, 1000)
	send(f[:500])
	time.Sleep(timeout / 3) // mid-frame, within the deadline
	send(f[500:])
	time.Sleep(timeout)
	if c.IsClosed() {
		t.Fatalf("a frame that arrived within the deadline closed the connection: %v", c.connError())
	}
}

// TestReasonsLogged (issue 24 item 8): the multiplexer's own reasons for
// ending a connection reach the Logger at Warn, with the peer's address;
// a connection the application closes is logged at Debug only.
func TestReasonsLogged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames [][]byte
		want   string
	}{
		{"oversize frame", [][]byte{syn(1), header{typ: typeData, id: 1, length: 64 << 20}.encode(nil)}, "a 67108864-byte frame, over the 1048576-byte limit"},
		{"window overrun", [][]byte{syn(1), data(1, baseWindow+1)}, "overran stream 1's 262144-byte window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			c, send := rawListener(t, Config{Logger: zap.New(core)}, nil)
			go send(tc.frames...)
			ended(t, c, "a protocol violation")
			warn := logs.FilterLevelExact(zapcore.WarnLevel).All()
			if len(warn) != 1 || !strings.Contains(fmt.Sprint(warn[0].ContextMap()["error"]), tc.want) || warn[0].ContextMap()["addr"] == nil {
				t.Fatalf("want one warning saying %q with the address, got %v", tc.want, logs.All())
			}
		})
	}
	core, logs := observer.New(zapcore.DebugLevel)
	c, _ := rawListener(t, Config{Logger: zap.New(core)}, nil)
	_ = c.Close()
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 || logs.Len() != 1 {
		t.Fatalf("closing a connection here: %v; want one Debug line", logs.All())
	}
}
