//go:build linux

package intrahost

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshtrain/meshtrain/collective"
)

// pair returns the two ends of a connected Unix socket.
func pair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// link returns both ends of a link over a fresh socket pair.
func link(t testing.TB) (*Sender, *Receiver) {
	t.Helper()
	sc, rc := pair(t)
	var r *Receiver
	var rerr error
	done := make(chan struct{})
	go func() { r, rerr = Offer(rc); close(done) }()
	s, err := Take(sc)
	<-done
	if err != nil || rerr != nil {
		t.Fatal(err, rerr)
	}
	t.Cleanup(func() { s.Close(); r.Unmap() })
	return s, r
}

func ringMaps(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:"+ringName)
}

// TestFrames: payloads of every kind of size arrive whole and in order:
// empty, in the ring (wrapping round it many times), and past half the
// ring (on the socket).
func TestFrames(t *testing.T) {
	s, r := link(t)
	sizes := []int{0, 1, 4096, RingBytes / 2, RingBytes/2 + 1, 3 << 20, 1 << 20}
	for i := 0; i < 40; i++ {
		sizes = append(sizes, 1+(i*377_777)%(RingBytes/2))
	}
	errc := make(chan error, 1)
	go func() {
		for i, n := range sizes {
			p := bytes.Repeat([]byte{byte(i + 1)}, n)
			if err := s.Send(context.Background(), collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Seq: uint64(i)}, p); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, n := range sizes {
		h, pr, err := r.Next(collective.DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, h.Len)
		if _, err := io.ReadFull(pr, got); err != nil {
			t.Fatal(err)
		}
		r.Done()
		if h.Seq != uint64(i) || len(got) != n || (n > 0 && (got[0] != byte(i+1) || got[n-1] != byte(i+1))) {
			t.Fatalf("frame %d: seq %d, %d bytes, want %d bytes of %d", i, h.Seq, len(got), n, i+1)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if ringMaps(t) != 2 {
		t.Fatalf("%d ring mappings, want 2 (one per end)", ringMaps(t))
	}
}

// TestBounds: what a lying peer can do is bounded and ends the link: a
// header past the frame bound is refused before its payload is read; a
// receiver that does not read makes the sender wait (within its ctx),
// never write past the ring; a credit beyond what was sent ends the
// link; and both ends unmap their ring on close.
func TestBounds(t *testing.T) {
	before := ringMaps(t)
	s, r := link(t)
	if err := s.Send(context.Background(), collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(1 << 20); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("a 2 MiB frame against a 1 MiB bound: %v", err)
	}

	s, r = link(t)
	half := make([]byte, RingBytes/2)
	for i := 0; i < 2; i++ {
		if err := s.Send(context.Background(), collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, half); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Send(ctx, collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, half); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third half-ring frame nobody read: %v, want the ctx's deadline", err)
	}
	var credit [8]byte
	binary.LittleEndian.PutUint64(credit[:], 5*RingBytes)
	if _, err := r.c.Write(credit[:]); err != nil {
		t.Fatal(err)
	}
	<-s.gone
	if err := s.Send(context.Background(), collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, half); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("after a credit beyond what was sent: %v", err)
	}
	s.Close()
	r.Unmap()
	if got := ringMaps(t); got != before+2 { // the first link's, closed by Cleanup
		t.Fatalf("%d ring mappings after closing a link, want %d", got, before+2)
	}
}

// TestTakeRefuses: the sender maps only a sealed memfd of RingBytes: a
// ring that could shrink would fault it (SIGBUS), one of another size is
// another build's.
func TestTakeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		seals int
		want  string
	}{
		{"unsealed", RingBytes, 0, "not sealed"},
		{"grow only", RingBytes, unix.F_SEAL_GROW, "not sealed"},
		{"small", RingBytes / 2, unix.F_SEAL_SHRINK | unix.F_SEAL_GROW, "want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, rc := pair(t)
			fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Ftruncate(fd, int64(tc.size)); err != nil {
				t.Fatal(err)
			}
			if tc.seals != 0 {
				if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, tc.seals); err != nil {
					t.Fatal(err)
				}
			}
			if err := sendFD(rc, fd, RingBytes); err != nil {
				t.Fatal(err)
			}
			if _, err := Take(sc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Take: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	t.Run("no descriptor", func(t *testing.T) {
		sc, rc := pair(t)
		if _, err := rc.Write(make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		if _, err := Take(sc); err == nil || !strings.Contains(err.Error(), "0 descriptors") {
			t.Fatalf("Take: %v", err)
		}
	})
}

// FuzzReceiver: whatever a peer writes on the socket, the receiver
// returns frames within the bound, each payload within the ring or read
// from the socket, or an error; it never panics or reads outside the ring.
func FuzzReceiver(f *testing.F) {
	var h [collective.HeaderSize]byte
	collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Len: 100}.Encode(h[:])
	f.Add(h[:])
	collective.Header{Kind: collective.KindAllReduceRing, DType: collective.Float32, Len: RingBytes / 2}.Encode(h[:])
	f.Add(append(h[:], h[:]...))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, r := link(t)
		go func() { _, _ = s.c.Write(in); s.Reset() }()
		for {
			h, pr, err := r.Next(1 << 20)
			if err != nil {
				return
			}
			if h.Len > 1<<20 {
				t.Fatalf("a %d-byte frame past the bound", h.Len)
			}
			if _, err := io.Copy(io.Discard, io.LimitReader(pr, int64(h.Len))); err != nil {
				return
			}
			r.Done()
		}
	})
}
