//go:build linux

package intrahost

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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
