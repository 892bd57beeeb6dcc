//go:build linux

package intrahost

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshtrain/meshtrain/collective"
)

// TestTakeShrinkThenSeal: a peer that passes an unsealed ring of the right
// size, then shrinks it and seals it while the taker checks, must be
// refused: mapped, the ring would fault (SIGBUS) on the first write.
func TestTakeShrinkThenSeal(t *testing.T) {
	sc, rc := pair(t)
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, RingBytes); err != nil {
		t.Fatal(err)
	}
	betweenChecks = func(int) {
		// The peer still holds fd: shrink, then seal.
		if err := unix.Ftruncate(fd, 0); err != nil {
			t.Error(err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			t.Error(err)
		}
	}
	defer func() { betweenChecks = nil }()
	if err := sendFD(rc, fd, RingBytes); err != nil {
		t.Fatal(err)
	}
	s, err := Take(sc)
	if err == nil {
		s.Close()
		t.Fatal("Take mapped a ring the peer shrank to 0 bytes")
	}
	if !strings.Contains(err.Error(), "not sealed") && !strings.Contains(err.Error(), "want") {
		t.Fatalf("Take: %v", err)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// TestNoDescriptorLeft: a refused ring, a ring passed with extra
// descriptors, and a link that ends all leave no descriptor and no
// mapping behind.
func TestNoDescriptorLeft(t *testing.T) {
	memfd := func(size, seals int) int {
		fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			t.Fatal(err)
		}
		if seals != 0 {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
				t.Fatal(err)
			}
		}
		return fd
	}
	sealed := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	for _, tc := range []struct {
		name string
		fds  func() []int
	}{
		{"unsealed", func() []int { return []int{memfd(RingBytes, 0)} }},
		{"small", func() []int { return []int{memfd(RingBytes/2, sealed)} }},
		{"three descriptors", func() []int {
			return []int{memfd(RingBytes, sealed), memfd(RingBytes, sealed), memfd(RingBytes, sealed)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, rc := pair(t)
			fds := tc.fds()
			before := openFDs(t) - len(fds)
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], RingBytes)
			if _, _, err := rc.WriteMsgUnix(b[:], unix.UnixRights(fds...), nil); err != nil {
				t.Fatal(err)
			}
			for _, fd := range fds {
				unix.Close(fd)
			}
			if s, err := Take(sc); err == nil {
				s.Close()
				t.Fatal("Take accepted it")
			}
			if got := openFDs(t); got != before {
				t.Fatalf("%d descriptors open, %d before", got, before)
			}
		})
	}
	t.Run("link", func(t *testing.T) {
		before, maps := openFDs(t), ringMaps(t)
		sc, rc := pair(t)
		var r *Receiver
		done := make(chan error, 1)
		go func() {
			var err error
			r, err = Offer(rc)
			done <- err
		}()
		s, err := Take(sc)
		if rerr := <-done; err != nil || rerr != nil {
			t.Fatal(err, rerr)
		}
		s.Close()
		r.Unmap()
		sc.Close()
		rc.Close()
		if got := openFDs(t); got != before {
			t.Fatalf("%d descriptors open, %d before", got, before)
		}
		if got := ringMaps(t); got != maps {
			t.Fatalf("%d rings mapped, %d before", got, maps)
		}
	})
}

// FuzzCredits: whatever a receiver writes back as credits, the sender
// never panics, never writes past the ring, and every Send returns within
// its context: a credit outside what was sent ends the link.
func FuzzCredits(f *testing.F) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1<<63)
	f.Add(b[:], uint16(100))
	binary.LittleEndian.PutUint64(b[:], 104)
	f.Add(b[:], uint16(100))
	f.Add([]byte{1, 2, 3}, uint16(7))
	f.Fuzz(func(t *testing.T, credits []byte, n uint16) {
		s, r := link(t)
		if _, err := r.c.Write(credits); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, int(n)+1)
		go func() { _, _ = io.Copy(io.Discard, r.c) }()
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := s.Send(ctx, collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, payload)
			cancel()
			if err != nil {
				return
			}
		}
	})
}
