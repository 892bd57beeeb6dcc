package gossip

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

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/rusage"
)

// gossipNet starts n gossip ends over an in-memory network, rank r's
// parameters being params[r].
func gossipNet(t *testing.T, params [][]float32, opts Options) (*collective.MemNetwork, []*Node) {
	t.Helper()
	n := len(params)
	net := collective.NewMemNetwork(n)
	gs := make([]*Node, n)
	ctx, cancel := context.WithCancel(context.Background())
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Logger = zaptest.NewLogger(t)
		if gs[r], err = New(c, params[r], o); err != nil {
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

func TestNodeMutualChoiceAveragesOnce(t *testing.T) {
	// With two ranks and the rotating schedule both always pick each
	// other: the lower rank's request wins, the other is declined, and
	// both end with the same bits, the mean.
	for trial := range 20 {
		a := []float32{1, 2, 3, float32(trial)}
		b := []float32{3, 6, -3, 0.5}
		_, gs := gossipNet(t, [][]float32{a, b}, options(func(o *Options) { o.Schedule = Rotate }))
		var wg sync.WaitGroup
		res := make([]Result, 2)
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

func TestNodeConcurrentExchangesConserveAndConverge(t *testing.T) {
	for _, s := range []Schedule{Random, Rotate, Exponential} {
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
			_, gs := gossipNet(t, params, options(func(o *Options) { o.Schedule, o.Seed = s, 9 }))
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
			// How many of the 500 attempts average rather than meet a busy
			// peer depends on the interleaving: a loaded machine gave 68×
			// where a quiet one gives over 100×. Without averaging the
			// distance would not move at all.
			if dist1 > dist0*0.1 {
				t.Errorf("consensus distance %v -> %v after %d rounds: want a 10× reduction", dist0, dist1, rounds)
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

// TestNodeSparseEqualsDense runs one scripted sequence of local sparse
// updates and exchanges twice, exchanging whole vectors and only changed
// coordinates: the replicas must end bitwise equal.
func TestNodeSparseEqualsDense(t *testing.T) {
	const n, dim, steps = 4, 5000, 200
	run := func(sparse bool) ([][]float32, int64) {
		params := make([][]float32, n)
		for r := range params {
			params[r] = make([]float32, dim) // equal start, as after the broadcast
		}
		_, gs := gossipNet(t, params, options(func(o *Options) { o.Seed, o.Sparse, o.SparseTolerance = 4, sparse, 0 }))
		for step, st := range sparseScript(n, dim, steps) {
			r := st.rank
			if sparse {
				if err := gs[r].ApplySparse(st.touched, st.update); err != nil {
					t.Fatal(err)
				}
			} else {
				gs[r].Read(make([]float32, dim))
				gs[r].Apply(st.update)
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
	sameBits(t, dense, denseSent, sparse, sparseSent)
}

// TestNodeOverlappedExchanges: ranks keep stepping while their exchange
// is in flight (Begin, local step, Begin ...): the answers land as
// changes, so the replicas' sum is exactly the local updates' sum.
func TestNodeOverlappedExchanges(t *testing.T) {
	const n, dim, steps = 4, 100, 150
	params := make([][]float32, n)
	for r := range params {
		params[r] = make([]float32, dim)
	}
	_, gs := gossipNet(t, params, options(func(o *Options) { o.Seed, o.MaxStaleness = 2, 3 }))
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

func TestNodeStalenessBound(t *testing.T) {
	a, b := []float32{0, 0}, []float32{4, 8}
	_, gs := gossipNet(t, [][]float32{a, b}, options(func(o *Options) { o.Schedule, o.MaxStaleness = Rotate, 1 }))
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

func TestNodeDeadPeerDroppedAndFinish(t *testing.T) {
	params := [][]float32{{0}, {2}, {100}}
	net, gs := gossipNet(t, params, options(func(o *Options) { o.Schedule, o.Timeout = Rotate, 5*time.Second }))
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

func TestNodeSilentPeerTimesOut(t *testing.T) {
	net, gs := gossipNet(t, [][]float32{{0}, {2}}, options(func(o *Options) { o.Schedule, o.Timeout = Rotate, 300*time.Millisecond }))
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

func TestNodeStopTravelsWithMessages(t *testing.T) {
	_, gs := gossipNet(t, [][]float32{{0}, {1}, {2}}, options(func(o *Options) { o.Schedule = Rotate }))
	gs[0].SetSteps(5)
	gs[2].SetSteps(7)
	// Stop without telling anyone directly: mark it, then let it travel.
	gs[0].mu.Lock()
	gs[0].m.stop = true
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

// BenchmarkNodeExchange times one rank's exchange with another over the
// in-memory network: LeNet's parameters, and a 16 MiB vector, where the
// copies of the messages dominate (cpu-ms/op: both ranks' CPU).
func BenchmarkNodeExchange(b *testing.B) {
	for _, c := range []struct {
		name string
		dim  int
	}{{"lenet", 61706}, {"16MiB", 4 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			params := [][]float32{make([]float32, c.dim), make([]float32, c.dim)}
			net := collective.NewMemNetwork(2)
			gs := make([]*Node, 2)
			for r := range 2 {
				comm, err := collective.New(net.Transport(r), collective.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if gs[r], err = New(comm, params[r], options(func(o *Options) { o.Schedule = Rotate })); err != nil {
					b.Fatal(err)
				}
				gs[r].Start(context.Background())
				defer gs[r].Close()
			}
			b.SetBytes(2 * 4 * int64(c.dim))
			cpu0 := rusage.CPUTime()
			for i := 0; b.Loop(); i++ {
				if res, err := gs[0].Exchange(context.Background(), uint64(i)); err != nil || res.Outcome != Averaged {
					b.Fatal(fmt.Sprint(res.Outcome, err))
				}
			}
			b.ReportMetric(float64(rusage.CPUTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}
