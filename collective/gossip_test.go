package collective

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

func TestGossipPeerSchedules(t *testing.T) {
	for _, s := range []PeerSchedule{GossipRandom, GossipRotate, GossipExponential} {
		for size := 1; size <= 9; size++ {
			for rank := range size {
				seen := map[int]bool{}
				for round := range uint64(64) {
					p := GossipPeer(s, 7, rank, size, round, nil)
					if size == 1 {
						if p != -1 {
							t.Fatalf("%v size 1: got peer %d, want -1", s, p)
						}
						continue
					}
					if p < 0 || p >= size || p == rank {
						t.Fatalf("%v size %d rank %d round %d: peer %d", s, size, rank, round, p)
					}
					if q := GossipPeer(s, 7, rank, size, round, nil); q != p {
						t.Fatalf("%v not pure: %d then %d", s, p, q)
					}
					seen[p] = true
				}
				if s != GossipExponential && size > 1 && len(seen) != size-1 {
					t.Errorf("%v size %d rank %d: met %d of %d peers in 64 rounds", s, size, rank, len(seen), size-1)
				}
			}
		}
	}
	// Rotate meets every peer once per size-1 rounds.
	for round := range uint64(4) {
		if got, want := GossipPeer(GossipRotate, 0, 1, 5, round, nil), (1+1+int(round))%5; got != want {
			t.Errorf("rotate round %d: peer %d, want %d", round, got, want)
		}
	}
	// Exponential: offsets 1, 2, 4 for size 8.
	for round, off := range []int{1, 2, 4, 1} {
		if got := GossipPeer(GossipExponential, 0, 3, 8, uint64(round), nil); got != (3+off)%8 {
			t.Errorf("exponential round %d: peer %d, want %d", round, got, (3+off)%8)
		}
	}
	// Random depends on the seed.
	same := 0
	for round := range uint64(50) {
		if GossipPeer(GossipRandom, 1, 0, 8, round, nil) == GossipPeer(GossipRandom, 2, 0, 8, round, nil) {
			same++
		}
	}
	if same > 25 {
		t.Errorf("random schedules with seeds 1 and 2 agree in %d of 50 rounds", same)
	}
	// Dropped peers are skipped, deterministically; none left gives -1.
	alive := func(p int) bool { return p == 0 || p == 3 }
	for round := range uint64(20) {
		if p := GossipPeer(GossipRandom, 3, 0, 5, round, alive); p != 3 {
			t.Fatalf("round %d: picked %d, only 3 is usable", round, p)
		}
	}
	if p := GossipPeer(GossipRotate, 3, 0, 5, 0, func(int) bool { return false }); p != -1 {
		t.Errorf("no usable peer: got %d", p)
	}
	if _, err := ParsePeerSchedule("gossipy"); err == nil {
		t.Error("ParsePeerSchedule accepted an unknown name")
	}
	for _, s := range []PeerSchedule{GossipRandom, GossipRotate, GossipExponential} {
		if got, err := ParsePeerSchedule(s.String()); err != nil || got != s {
			t.Errorf("ParsePeerSchedule(%q) = %v, %v", s, got, err)
		}
	}
}

// gossipNet starts n gossip ends over an in-memory network, rank r's
// parameters being params[r].
func gossipNet(t *testing.T, params [][]float32, opts GossipOptions) (*MemNetwork, []*Gossip) {
	t.Helper()
	n := len(params)
	net := NewMemNetwork(n)
	gs := make([]*Gossip, n)
	ctx, cancel := context.WithCancel(context.Background())
	for r := range n {
		c, err := New(net.Transport(r), Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Logger = zaptest.NewLogger(t)
		if gs[r], err = NewGossip(c, params[r], o); err != nil {
			t.Fatal(err)
		}
		gs[r].Start(ctx)
	}
	t.Cleanup(func() {
		cancel()
		for _, g := range gs {
			g.Close()
		}
	})
	return net, gs
}

func TestGossipMutualChoiceAveragesOnce(t *testing.T) {
	// With two ranks and the rotating schedule both always pick each
	// other: the lower rank's request wins, the other is declined, and
	// both end with the same bits, the mean.
	for trial := range 20 {
		a := []float32{1, 2, 3, float32(trial)}
		b := []float32{3, 6, -3, 0.5}
		_, gs := gossipNet(t, [][]float32{a, b}, GossipOptions{Schedule: GossipRotate})
		var wg sync.WaitGroup
		res := make([]ExchangeResult, 2)
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if res[r], err = gs[r].Exchange(context.Background(), 0); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		averaged := 0
		for _, r := range res {
			if r.Outcome == Averaged {
				averaged++
			} else if r.Outcome != Declined {
				t.Fatalf("trial %d: outcome %v", trial, r.Outcome)
			}
		}
		s0, s1 := gs[0].Stats(), gs[1].Stats()
		if averaged != s0.Served+s1.Served || averaged < 1 {
			t.Fatalf("trial %d: %d averaged exchanges, served %d+%d", trial, averaged, s0.Served, s1.Served)
		}
		if averaged == 1 {
			want := []float32{2, 4, 0, (float32(trial) + 0.5) / 2}
			if !slices.Equal(a, want) || !slices.Equal(b, want) {
				t.Fatalf("trial %d: after one average got %v and %v, want %v", trial, a, b, want)
			}
		}
		if !slices.Equal(a, b) {
			t.Fatalf("trial %d: replicas differ after averaging: %v vs %v", trial, a, b)
		}
	}
}

func consensus(params [][]float32) (mean []float64, dist float64) {
	mean = make([]float64, len(params[0]))
	for _, p := range params {
		for i, v := range p {
			mean[i] += float64(v) / float64(len(params))
		}
	}
	for _, p := range params {
		for i, v := range p {
			d := float64(v) - mean[i]
			dist += d * d
		}
	}
	return mean, math.Sqrt(dist / float64(len(params)))
}

func TestGossipConcurrentExchangesConserveAndConverge(t *testing.T) {
	for _, s := range []PeerSchedule{GossipRandom, GossipRotate, GossipExponential} {
		t.Run(s.String(), func(t *testing.T) {
			const n, dim, rounds = 5, 257, 100
			rng := rand.New(rand.NewPCG(1, 2))
			params := make([][]float32, n)
			for r := range params {
				params[r] = make([]float32, dim)
				for i := range params[r] {
					params[r][i] = float32(rng.NormFloat64())
				}
			}
			mean0, dist0 := consensus(params)
			_, gs := gossipNet(t, params, GossipOptions{Schedule: s, Seed: 9})
			var wg sync.WaitGroup
			for r := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range uint64(rounds) {
						if _, err := gs[r].Exchange(context.Background(), round); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			mean1, dist1 := consensus(params)
			for i := range mean0 {
				if math.Abs(mean0[i]-mean1[i]) > 1e-5 {
					t.Fatalf("coordinate %d: mean moved from %v to %v: averaging must conserve the sum", i, mean0[i], mean1[i])
				}
			}
			if dist1 > dist0*1e-2 {
				t.Errorf("consensus distance %v -> %v after %d rounds: want a 100× reduction", dist0, dist1, rounds)
			}
			total := 0
			for _, g := range gs {
				st := g.Stats()
				total += st.Averaged
				if st.Initiated != rounds || st.Averaged+st.Declined != rounds || st.Failed != 0 {
					t.Errorf("rank stats %+v", st)
				}
				if len(st.Distances) != st.Averaged {
					t.Errorf("%d distance samples for %d averages", len(st.Distances), st.Averaged)
				}
			}
			if total < n*rounds/10 {
				t.Errorf("only %d of %d exchanges averaged", total, n*rounds)
			}
		})
	}
}

// TestGossipSparseEqualsDense runs one scripted sequence of local sparse
// updates and exchanges twice, exchanging whole vectors and only changed
// coordinates: the replicas must end bitwise equal.
func TestGossipSparseEqualsDense(t *testing.T) {
	const n, dim, steps = 4, 5000, 200
	run := func(sparse bool) ([][]float32, int64) {
		params := make([][]float32, n)
		for r := range params {
			params[r] = make([]float32, dim) // equal start, as after the broadcast
		}
		_, gs := gossipNet(t, params, GossipOptions{Schedule: GossipRandom, Seed: 4, Sparse: sparse})
		rng := rand.New(rand.NewPCG(5, 6))
		var touched []int32
		for step := range steps {
			r := rng.IntN(n)
			touched = touched[:0]
			for range 1 + rng.IntN(6) {
				touched = append(touched, int32(rng.IntN(dim)))
			}
			delta := float32(rng.NormFloat64())
			update := func(p []float32) {
				for _, u := range touched {
					p[u] += delta
				}
			}
			if sparse {
				if err := gs[r].ApplySparse(touched, update); err != nil {
					t.Fatal(err)
				}
			} else {
				gs[r].Read(make([]float32, dim))
				gs[r].Apply(update)
			}
			res, err := gs[r].Exchange(context.Background(), uint64(step))
			if err != nil || res.Outcome != Averaged {
				t.Fatalf("step %d: %v, %v", step, res.Outcome, err)
			}
		}
		var sent int64
		for _, g := range gs {
			sent += g.Stats().ElementsSent
		}
		return params, sent
	}
	dense, denseSent := run(false)
	sparse, sparseSent := run(true)
	for r := range dense {
		if !slices.Equal(dense[r], sparse[r]) {
			for i := range dense[r] {
				if dense[r][i] != sparse[r][i] {
					t.Fatalf("rank %d coordinate %d: dense exchange gives %v, sparse %v", r, i, dense[r][i], sparse[r][i])
				}
			}
		}
	}
	if sparseSent*10 > denseSent {
		t.Errorf("sparse exchange sent %d values, dense %d: want at least 10× fewer", sparseSent, denseSent)
	}
	t.Logf("values sent: dense %d, sparse %d", denseSent, sparseSent)
}

// TestGossipOverlappedExchanges: ranks keep stepping while their exchange
// is in flight (Begin, local step, Begin ...): the answers land as
// changes, so the replicas' sum is exactly the local updates' sum.
func TestGossipOverlappedExchanges(t *testing.T) {
	const n, dim, steps = 4, 100, 150
	params := make([][]float32, n)
	for r := range params {
		params[r] = make([]float32, dim)
	}
	_, gs := gossipNet(t, params, GossipOptions{Schedule: GossipRandom, Seed: 2, MaxStaleness: 3})
	ctx := context.Background()
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := make([]float32, dim)
			for step := range steps {
				gs[r].Read(work)
				gs[r].Apply(func(p []float32) {
					for i := range p {
						p[i] += float32(r + 1) // every rank pushes its own way
					}
				})
				if _, err := gs[r].Begin(ctx, uint64(step)); err != nil {
					t.Error(err)
					return
				}
			}
			if _, err := gs[r].Wait(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mean, dist := consensus(params)
	want := float64(steps) * (1 + 2 + 3 + 4) / n
	for i, m := range mean {
		if math.Abs(m-want) > 1e-3*want {
			t.Fatalf("coordinate %d: mean %v, want %v: overlapped answers must keep the sum", i, m, want)
		}
	}
	stale, averaged := 0, 0
	for _, g := range gs {
		st := g.Stats()
		stale = max(stale, st.StalenessMax)
		averaged += st.Averaged
		if st.StalenessMax > 3 {
			t.Errorf("staleness %d above the bound 3", st.StalenessMax)
		}
	}
	if averaged < n*steps/4 {
		t.Errorf("only %d of %d exchanges averaged", averaged, n*steps)
	}
	t.Logf("averaged %d, max staleness %d, consensus distance %.3f", averaged, stale, dist)
}

func TestGossipStalenessBound(t *testing.T) {
	a, b := []float32{0, 0}, []float32{4, 8}
	_, gs := gossipNet(t, [][]float32{a, b}, GossipOptions{Schedule: GossipRotate, MaxStaleness: 1})
	work := make([]float32, 2)
	gs[1].Read(work) // rank 1 is computing on a copy
	ctx := context.Background()
	r1, err := gs[0].Exchange(ctx, 0)
	if err != nil || r1.Outcome != Averaged {
		t.Fatalf("first exchange: %v %v", r1.Outcome, err)
	}
	if r1.Distance != math.Sqrt(16+64) {
		t.Errorf("distance %v, want %v", r1.Distance, math.Sqrt(80))
	}
	r2, err := gs[0].Exchange(ctx, 1)
	if err != nil || r2.Outcome != Declined {
		t.Fatalf("second exchange inside the same step: %v %v, want declined (staleness bound 1)", r2.Outcome, err)
	}
	if s := gs[1].Apply(func(p []float32) { p[0]++ }); s != 1 {
		t.Errorf("step staleness %d, want 1", s)
	}
	st := gs[1].Stats()
	if st.RefusedStale != 1 || st.StalenessMax != 1 || st.Served != 1 {
		t.Errorf("responder stats %+v", st)
	}
	if r3, err := gs[0].Exchange(ctx, 2); err != nil || r3.Outcome != Averaged {
		t.Fatalf("exchange after the step: %v %v", r3.Outcome, err)
	}
	if !slices.Equal(a, b) || a[0] != 2.5 || a[1] != 4 {
		t.Errorf("got %v and %v, want both [2.5 4]", a, b)
	}
}

func TestGossipDeadPeerDroppedAndFinish(t *testing.T) {
	params := [][]float32{{0}, {2}, {100}}
	net, gs := gossipNet(t, params, GossipOptions{Schedule: GossipRotate, Timeout: 5 * time.Second})
	ctx := context.Background()
	start := time.Now()
	net.Kill(2)
	for round := range uint64(6) {
		res, err := gs[0].Exchange(ctx, round)
		if err != nil {
			t.Fatal(err)
		}
		// Rank 0 learns of the death from its receiver or from this
		// exchange, whichever comes first.
		if res.Peer == 2 && res.Outcome != Lost {
			t.Fatalf("exchange with the killed rank: %v", res.Outcome)
		}
	}
	if !slices.Equal(gs[0].Peers(), []int{1}) {
		t.Fatalf("rank 0's peers %v after rank 2 died", gs[0].Peers())
	}
	if time.Since(start) > 4*time.Second {
		t.Errorf("detecting the dead peer took %v: want the link failure, not the timeout", time.Since(start))
	}
	if st := gs[0].Stats(); !slices.Equal(st.Dead, []int{2}) {
		t.Errorf("dead peers %v", st.Dead)
	}
	var finals [2][][]float32
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			finals[r] = gs[r].Finish(ctx)
		}()
	}
	wg.Wait()
	for r := range 2 {
		if finals[r][0] == nil || finals[r][1] == nil || finals[r][2] != nil {
			t.Fatalf("rank %d finals %v: want ranks 0 and 1 only", r, finals[r])
		}
		if finals[r][0][0] != 1 || finals[r][1][0] != 1 {
			t.Errorf("rank %d finals %v: want both at the average 1", r, finals[r])
		}
	}
	if res, err := gs[0].Exchange(ctx, 9); err == nil {
		t.Errorf("exchange after Finish: %v, want an error", res)
	}
}

func TestGossipSilentPeerTimesOut(t *testing.T) {
	net, gs := gossipNet(t, [][]float32{{0}, {2}}, GossipOptions{Schedule: GossipRotate, Timeout: 300 * time.Millisecond})
	net.Drop(0, 1) // rank 1 never hears rank 0: a hung peer, not a closed link
	res, err := gs[0].Exchange(context.Background(), 0)
	if err != nil || res.Outcome != Lost || res.Err == nil {
		t.Fatalf("exchange with a silent peer: %v %v %v, want lost after the timeout", res.Outcome, res.Err, err)
	}
	if len(gs[0].Peers()) != 0 {
		t.Errorf("silent peer still in the peer set: %v", gs[0].Peers())
	}
	if res, err := gs[0].Exchange(context.Background(), 1); err != nil || res.Outcome != NoPeer {
		t.Errorf("exchange with nobody left: %v %v", res.Outcome, err)
	}
}

func TestGossipStopTravelsWithMessages(t *testing.T) {
	_, gs := gossipNet(t, [][]float32{{0}, {1}, {2}}, GossipOptions{Schedule: GossipRotate})
	gs[0].SetSteps(5)
	gs[2].SetSteps(7)
	// Stop without telling anyone directly: mark it, then let it travel.
	gs[0].mu.Lock()
	gs[0].stop = true
	gs[0].mu.Unlock()
	if _, err := gs[1].Exchange(context.Background(), 1); err != nil { // rank 1 round 1 -> rank 0
		t.Fatal(err)
	}
	total, stop := gs[1].Progress()
	if !stop || total != 5 {
		t.Errorf("rank 1 progress %d, stop %v: want 5 and true from rank 0's reply", total, stop)
	}
	if _, err := gs[1].Exchange(context.Background(), 0); err != nil { // -> rank 2
		t.Fatal(err)
	}
	if total, _ := gs[2].Progress(); total != 12 {
		t.Errorf("rank 2 heard %d steps, want 12 (its own 7 and rank 0's 5 via rank 1)", total)
	}
}

func FuzzGossipDecode(f *testing.F) {
	c, err := New(NewMemNetwork(3).Transport(0), Options{})
	if err != nil {
		f.Fatal(err)
	}
	g, err := NewGossip(c, make([]float32, 8), GossipOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(g.encode(msgRequest, 1, 0, 0, nil, make([]float32, 8), false))
	f.Add(g.encode(msgReply, 2, 1, 1, []int32{1, 7}, []float32{1, 2}, true))
	f.Add(g.encode(msgFinal, 0, 0, 0, nil, nil, false))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := g.decode(b)
		if err != nil {
			return
		}
		if len(m.vals) > 8 || len(m.idx) > len(m.vals) || len(m.counts) != 3 {
			t.Fatalf("decoded %d values, %d indices, %d counts", len(m.vals), len(m.idx), len(m.counts))
		}
		// A decoded message re-encodes to the same bytes (modulo counts,
		// which encode takes from the Gossip).
		if m.kind < msgRequest || m.kind > msgFinal {
			t.Fatalf("kind %d accepted", m.kind)
		}
	})
}

func BenchmarkGossipExchangeLeNet(b *testing.B) {
	const dim = 61706
	params := [][]float32{make([]float32, dim), make([]float32, dim)}
	net := NewMemNetwork(2)
	gs := make([]*Gossip, 2)
	for r := range 2 {
		c, err := New(net.Transport(r), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if gs[r], err = NewGossip(c, params[r], GossipOptions{Schedule: GossipRotate}); err != nil {
			b.Fatal(err)
		}
		gs[r].Start(context.Background())
		defer gs[r].Close()
	}
	b.SetBytes(2 * 4 * dim)
	for i := 0; b.Loop(); i++ {
		if res, err := gs[0].Exchange(context.Background(), uint64(i)); err != nil || res.Outcome != Averaged {
			b.Fatal(fmt.Sprint(res.Outcome, err))
		}
	}
}
