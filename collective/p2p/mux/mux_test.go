package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

// muxPair returns a dialler's and a listener's multiplexed connection.
func muxPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := tcpPair(t)
	ca, _ := tr.NewConn(a, false, nil)
	cb, _ := tr.NewConn(b, true, nil)
	t.Cleanup(func() { _ = ca.Close(); _ = cb.Close() })
	return ca.(*Conn), cb.(*Conn)
}

func open(t testing.TB, dialler, listener *Conn) (network.MuxedStream, network.MuxedStream) {
	t.Helper()
	s, err := dialler.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The listener learns of a stream from its first frame: SYN, sent at once.
	r, err := listener.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// TestStreamsCarryBytesIntact sends random data both ways on several
// streams at once, in writes and reads of random sizes (small ones that
// are buffered, large ones that land in the reader's buffer), and checks
// every byte.
func TestStreamsCarryBytesIntact(t *testing.T) {
	for _, window := range []uint32{baseWindow, 16 << 20} {
		a, b := muxPair(t, Config{Window: window, MaxFrame: 256 << 10})
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 4 {
			s, r := open(t, a, b)
			for dir, pair := range [][2]network.MuxedStream{{s, r}, {r, s}} {
				seed := uint64(i*2 + dir)
				wg.Add(2)
				go func() {
					defer wg.Done()
					errs <- writeRandom(pair[0], seed, 3<<20)
				}()
				go func() {
					defer wg.Done()
					errs <- readRandom(pair[1], seed, 3<<20)
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("window %d: %v", window, err)
			}
		}
	}
}

func payload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeRandom(w network.MuxedStream, seed uint64, n int) error {
	data := payload(seed, n)
	rng := rand.New(rand.NewPCG(seed, 2))
	for len(data) > 0 {
		k := min(len(data), 1+rng.IntN(1<<20))
		if rng.IntN(3) == 0 {
			k = min(len(data), 1+rng.IntN(100))
		}
		if _, err := w.Write(data[:k]); err != nil {
			return err
		}
		data = data[k:]
	}
	return w.CloseWrite()
}

func readRandom(r network.MuxedStream, seed uint64, n int) error {
	want := sha256.Sum256(payload(seed, n))
	h := sha256.New()
	rng := rand.New(rand.NewPCG(seed, 3))
	got := 0
	for {
		buf := make([]byte, 1+rng.IntN(2<<20))
		k, err := r.Read(buf)
		h.Write(buf[:k])
		got += k
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if got != n || !bytes.Equal(h.Sum(nil), want[:]) {
		return errors.New("stream data differs from what was written")
	}
	return nil
}

// TestLargeReadsLand checks the point of the package: a Read waiting with
// a large buffer gets its bytes without a pass through the chunk buffers.
func TestLargeReadsLand(t *testing.T) {
	a, b := muxPair(t, Config{})
	s, r := open(t, a, b)
	const frames, size = 32, 1 << 20
	go func() {
		data := payload(1, size)
		for range frames {
			if _, err := s.Write(data); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, size)
	for range frames {
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
	}
	lent, total := b.lentBytes.Load(), int64(frames*size)
	t.Logf("%d of %d bytes landed in the reader's buffer", lent, total)
	if lent < total/4 {
		t.Fatalf("only %d of %d bytes landed in the reader's buffer: the rest went through chunks", lent, total)
	}
}

// TestFlowControl: a stream whose reader does not read stops its writer
// after one window, and the connection's other streams go on.
func TestFlowControl(t *testing.T) {
	a, b := muxPair(t, Config{Window: baseWindow})
	s1, _ := open(t, a, b)
	s2, r2 := open(t, a, b)
	_ = s1.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := s1.Write(make([]byte, 4*baseWindow))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != baseWindow {
		t.Fatalf("writing 4 windows to a stream nobody reads: wrote %d, %v; want %d and a deadline error", n, err, baseWindow)
	}
	go func() { _, _ = s2.Write([]byte("still flowing")); _ = s2.CloseWrite() }()
	got, err := io.ReadAll(r2)
	if err != nil || string(got) != "still flowing" {
		t.Fatalf("other stream: %q, %v", got, err)
	}
}

// TestReadDeadline: an expired Read takes its buffer back, and bytes that
// arrive later are read in order.
func TestReadDeadline(t *testing.T) {
	a, b := muxPair(t, Config{})
	s, r := open(t, a, b)
	_ = r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 1<<20)
	start := time.Now()
	if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read on an idle stream: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Read returned %v after a 50 ms deadline", d)
	}
	var ne net.Error
	_ = r.SetReadDeadline(time.Time{})
	data := payload(7, 3<<20)
	go func() { _, _ = s.Write(data); _ = s.CloseWrite() }()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the deadline: %d bytes, %v", len(got), err)
	}
	if err := os.ErrDeadlineExceeded; !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatal("the deadline error is not a net.Error timeout")
	}
}

// TestResetBothWays: a reset ends the stream for both sides with the code.
func TestResetBothWays(t *testing.T) {
	a, b := muxPair(t, Config{})
	s, r := open(t, a, b)
	readErr := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1<<20)) // lent while the reset arrives
		readErr <- err
	}()
	offered(t, r)
	_ = s.ResetWithError(network.StreamProtocolViolation)
	var se *network.StreamError
	select {
	case err := <-readErr:
		if !errors.As(err, &se) || !se.Remote || se.ErrorCode != network.StreamProtocolViolation || !errors.Is(err, network.ErrReset) {
			t.Fatalf("reader after the peer's reset: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Read did not return after the peer reset the stream")
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, network.ErrReset) {
		t.Fatalf("write after a local reset: %v", err)
	}
	if _, err := r.Write([]byte("x")); !errors.Is(err, network.ErrReset) {
		t.Fatalf("write after the peer's reset: %v", err)
	}
}

// TestHalfClose: after CloseWrite the peer reads EOF and can still answer.
func TestHalfClose(t *testing.T) {
	a, b := muxPair(t, Config{})
	s, r := open(t, a, b)
	_, _ = s.Write([]byte("question"))
	_ = s.CloseWrite()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "question" {
		t.Fatalf("read %q, %v", got, err)
	}
	_, _ = r.Write([]byte("answer"))
	_ = r.Close()
	got, err = io.ReadAll(s)
	if err != nil || string(got) != "answer" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := s.Write([]byte("more")); err == nil {
		t.Fatal("a write after CloseWrite succeeded")
	}
}

// TestConnCloseEndsWaits: closing the connection ends every wait.
func TestConnCloseEndsWaits(t *testing.T) {
	a, b := muxPair(t, Config{Window: baseWindow})
	s, _ := open(t, a, b)
	_, r := open(t, a, b)
	errs := make(chan error, 3)
	go func() { _, err := r.Read(make([]byte, 10)); errs <- err }()            // an idle stream
	go func() { _, err := s.Write(make([]byte, 2*baseWindow)); errs <- err }() // blocks on credit
	go func() { _, err := b.AcceptStream(); errs <- err }()
	offered(t, r)
	ss := s.(*stream)
	eventually(t, "the Write to run out of credit", func() bool {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.credit == 0
	})
	_ = b.Close()
	for range 3 {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("an operation succeeded on a closed connection")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an operation still waits after the connection closed")
		}
	}
	if !a.IsClosed() {
		// The peer saw the go-away.
		select {
		case <-a.done:
		case <-time.After(5 * time.Second):
			t.Fatal("the peer's connection did not end after a go-away")
		}
	}
}

// TestStalledPeer: a peer that stops in the middle of a frame cannot hold
// a Read whose buffer it was filling past its deadline.
func TestStalledPeer(t *testing.T) {
	tr, _ := New(Config{})
	raw, other := tcpPair(t)
	defer raw.Close()
	c, _ := tr.NewConn(other, true, nil)
	defer c.Close()
	// Open stream 1 from the raw side and send half of a 1 MiB frame.
	_, _ = raw.Write(header{typ: typeWindow, flags: flagSYN, id: 1}.encode(nil))
	r, err := c.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_ = r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := io.ReadFull(r, make([]byte, 1<<20))
		readErr <- err
	}()
	offered(t, r)
	_, _ = raw.Write(header{typ: typeData, id: 1, length: 1 << 20}.encode(nil))
	_, _ = raw.Write(make([]byte, 100<<10))
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("a Read of a frame that never finished succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Read is held by a peer stalled mid-frame")
	}
}

// TestProtocolViolations: a peer that breaks the protocol ends the
// connection with an error that says how.
func TestProtocolViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames [][]byte
		want   string
	}{
		{"frame over the limit", [][]byte{header{typ: typeWindow, flags: flagSYN, id: 1}.encode(nil), header{typ: typeData, id: 1, length: 2 << 20}.encode(nil)}, "over the"},
		{"window overrun", [][]byte{header{typ: typeWindow, flags: flagSYN, id: 1}.encode(nil), header{typ: typeData, id: 1, length: 1 << 20}.encode(nil)}, "overran"},
		{"our stream ID", [][]byte{header{typ: typeWindow, flags: flagSYN, id: 2}.encode(nil)}, "this side's to give"},
		{"version", [][]byte{{9, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := New(Config{Window: baseWindow, MaxFrame: 1 << 20})
			raw, other := tcpPair(t)
			defer raw.Close()
			mc, _ := tr.NewConn(other, true, nil)
			c := mc.(*Conn)
			for _, f := range tc.frames {
				_, _ = raw.Write(f)
			}
			go func() { _, _ = raw.Write(make([]byte, 1<<20)) }()
			select {
			case <-c.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the connection survived a protocol violation")
			}
			if err := c.connError(); !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// BenchmarkStream moves 64 MiB one way over loopback TCP in 1 MiB writes
// and reads, through this multiplexer and through go-yamux as libp2p
// configures it.
func BenchmarkStream(b *testing.B) {
	mesh, _ := New(Config{Window: 64 << 20})
	for _, m := range []struct {
		name string
		tr   network.Multiplexer
	}{{"mesh", mesh}, {"yamux", yamux.DefaultTransport}} {
		b.Run(m.name, func(b *testing.B) {
			x, y := tcpPair(b)
			ca, _ := m.tr.NewConn(x, false, nil)
			cb, _ := m.tr.NewConn(y, true, nil)
			defer ca.Close()
			defer cb.Close()
			s, _ := ca.OpenStream(context.Background())
			_, _ = s.Write([]byte{1})
			r, _ := cb.AcceptStream()
			_ = Grant(r) // the whole window, as p2p grants its collective stream (on yamux: a no-op)
			_, _ = io.ReadFull(r, make([]byte, 1))
			const total, piece = 64 << 20, 1 << 20
			src, dst := make([]byte, piece), make([]byte, piece)
			b.SetBytes(total)
			b.ResetTimer()
			for range b.N {
				done := make(chan error, 1)
				go func() {
					for range total / piece {
						if _, err := s.Write(src); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
				for range total / piece {
					if _, err := io.ReadFull(r, dst); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzPeerBytes feeds a connection whatever a peer might send: it must
// never panic, and must end (not hang) once the peer hangs up.
func FuzzPeerBytes(f *testing.F) {
	f.Add(append(header{typ: typeWindow, flags: flagSYN, id: 1, length: 1 << 20}.encode(nil),
		append(header{typ: typeData, flags: flagFIN, id: 1, length: 5}.encode(nil), "hello"...)...))
	f.Add(header{typ: typeReset, id: 1, length: 7}.encode(nil))
	f.Add(header{typ: typeGoAway, length: 1}.encode(nil))
	f.Add(append(header{typ: typeData, flags: flagSYN, id: 3, length: 3}.encode(nil), 1, 2, 3))
	f.Add(append(header{typ: typePing, flags: flagSYN, length: 9}.encode(nil), header{typ: typePing, flags: flagACK, length: 9}.encode(nil)...))
	f.Add(header{typ: typeWindow, flags: flagACK, id: 2, length: 1 << 20}.encode(nil))
	tr, _ := New(Config{Window: baseWindow, MaxFrame: 64 << 10, MaxStreams: 4})
	f.Fuzz(func(t *testing.T, in []byte) {
		raw, other := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, raw) }() // the window updates it provokes
		mc, _ := tr.NewConn(other, true, nil)
		c := mc.(*Conn)
		go func() {
			for {
				s, err := c.AcceptStream()
				if err != nil {
					return
				}
				go func() {
					_, _ = io.Copy(io.Discard, s)
					_ = s.Close()
				}()
			}
		}()
		_, _ = raw.Write(in)
		_ = raw.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection did not end after its peer hung up")
		}
	})
}
