package gossip

import (
	"fmt"
	"math/bits"
)

// Schedule says whom a rank averages with at each gossip round. Every
// schedule is a pure function of (seed, rank, size, round): two runs with
// the same seed pick the same peers, and a test can list the pairs a run
// will form without running it.
type Schedule int

// Peer schedules.
const (
	// Random picks a uniformly random other rank each round, from a hash
	// of (seed, rank, round): AD-PSGD's choice (Lian et al., 2018).
	Random Schedule = iota
	// Rotate walks the other ranks in turn: round t pairs rank r with
	// r+1+(t mod (size-1)), so every pair meets once per size-1 rounds.
	Rotate
	// Exponential is Stochastic Gradient Push's time-varying exponential
	// graph (Assran et al., 2019): round t pairs rank r with
	// r+2^(t mod ⌈log2 size⌉), so information reaches every rank in
	// ⌈log2 size⌉ rounds.
	Exponential
)

var scheduleNames = [...]string{"random", "rotate", "exponential"}

func (s Schedule) String() string {
	if s >= 0 && int(s) < len(scheduleNames) {
		return scheduleNames[s]
	}
	return fmt.Sprintf("schedule(%d)", int(s))
}

// ParseSchedule parses "random", "rotate" or "exponential".
func ParseSchedule(s string) (Schedule, error) {
	for i, n := range scheduleNames {
		if n == s {
			return Schedule(i), nil
		}
	}
	return 0, fmt.Errorf("gossip: unknown peer schedule %q: want random, rotate or exponential", s)
}

// Peer returns the rank that rank averages with in round, or -1 when no
// other rank is usable. usable (nil: every rank) tells which ranks are
// still in the peer set; when the scheduled peer is not, the next usable
// rank after it (in rank order, wrapping) is taken, so the choice stays a
// pure function of the arguments and of the peer set.
func (s Schedule) Peer(seed uint64, rank, size int, round uint64, usable func(int) bool) int {
	if size < 2 || rank < 0 || rank >= size {
		return -1
	}
	var off int // in [1, size-1]
	switch s {
	case Rotate:
		off = 1 + int(round%uint64(size-1))
	case Exponential:
		k := uint64(bits.Len(uint(size - 1))) // ⌈log2 size⌉ for size ≥ 2
		off = 1 << (round % k)
		if off >= size {
			off = size - 1
		}
	default:
		off = 1 + int(splitmix(seed^splitmix(uint64(rank)<<32^round))%uint64(size-1))
	}
	// Walk the other ranks cyclically from the scheduled one; off stays in
	// [1, size-1], so rank itself is never chosen.
	for i := 0; i < size-1; i++ {
		p := (rank + 1 + (off-1+i)%(size-1)) % size
		if usable == nil || usable(p) {
			return p
		}
	}
	return -1
}

// splitmix is SplitMix64's finaliser: a cheap, well-mixed hash.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
