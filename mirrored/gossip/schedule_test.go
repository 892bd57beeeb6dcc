package gossip

import "testing"

func TestSchedulePeer(t *testing.T) {
	for _, s := range []Schedule{Random, Rotate, Exponential} {
		for size := 1; size <= 9; size++ {
			for rank := range size {
				seen := map[int]bool{}
				for round := range uint64(64) {
					p := s.Peer(7, rank, size, round, nil)
					if size == 1 {
						if p != -1 {
							t.Fatalf("%v size 1: got peer %d, want -1", s, p)
						}
						continue
					}
					if p < 0 || p >= size || p == rank {
						t.Fatalf("%v size %d rank %d round %d: peer %d", s, size, rank, round, p)
					}
					if q := s.Peer(7, rank, size, round, nil); q != p {
						t.Fatalf("%v not pure: %d then %d", s, p, q)
					}
					seen[p] = true
				}
				if s != Exponential && size > 1 && len(seen) != size-1 {
					t.Errorf("%v size %d rank %d: met %d of %d peers in 64 rounds", s, size, rank, len(seen), size-1)
				}
			}
		}
	}
}

func TestSchedulePeerByHand(t *testing.T) {
	for _, c := range []struct {
		name              string
		s                 Schedule
		rank, size, round int
		usable            func(int) bool
		want              int
	}{
		// Rotate meets every peer once per size-1 rounds.
		{"rotate round 0", Rotate, 1, 5, 0, nil, 2},
		{"rotate round 1", Rotate, 1, 5, 1, nil, 3},
		{"rotate round 3", Rotate, 1, 5, 3, nil, 0},
		{"rotate round 4 wraps", Rotate, 1, 5, 4, nil, 2},
		// Exponential: offsets 1, 2, 4 for size 8, then again.
		{"exponential round 0", Exponential, 3, 8, 0, nil, 4},
		{"exponential round 1", Exponential, 3, 8, 1, nil, 5},
		{"exponential round 2", Exponential, 3, 8, 2, nil, 7},
		{"exponential round 3", Exponential, 3, 8, 3, nil, 4},
		// A dropped peer is skipped for the next usable one; none gives -1.
		{"rotate skips the unusable", Rotate, 0, 5, 0, func(p int) bool { return p != 1 }, 2},
		{"nobody usable", Rotate, 0, 5, 0, func(int) bool { return false }, -1},
		{"rank out of range", Random, 5, 5, 0, nil, -1},
	} {
		if got := c.s.Peer(3, c.rank, c.size, uint64(c.round), c.usable); got != c.want {
			t.Errorf("%s: peer %d, want %d", c.name, got, c.want)
		}
	}
}

func TestScheduleRandom(t *testing.T) {
	// Random depends on the seed.
	same := 0
	for round := range uint64(50) {
		if Random.Peer(1, 0, 8, round, nil) == Random.Peer(2, 0, 8, round, nil) {
			same++
		}
	}
	if same > 25 {
		t.Errorf("random schedules with seeds 1 and 2 agree in %d of 50 rounds", same)
	}
	// Dropped peers are skipped, deterministically.
	alive := func(p int) bool { return p == 0 || p == 3 }
	for round := range uint64(20) {
		if p := Random.Peer(3, 0, 5, round, alive); p != 3 {
			t.Fatalf("round %d: picked %d, only 3 is usable", round, p)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	if _, err := ParseSchedule("gossipy"); err == nil {
		t.Error("ParseSchedule accepted an unknown name")
	}
	for _, s := range []Schedule{Random, Rotate, Exponential} {
		if got, err := ParseSchedule(s.String()); err != nil || got != s {
			t.Errorf("ParseSchedule(%q) = %v, %v", s, got, err)
		}
	}
}
