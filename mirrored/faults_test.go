package mirrored

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// hookCall is one call of Faults.Hook.
type hookCall struct {
	p       Point
	rank    int
	step    int
	started time.Time
}

func (c hookCall) String() string { return fmt.Sprintf("%v step %d", c.p, c.step) }

// strategyCase is a small run on 2 replicas of the in-memory network,
// under one strategy; run runs jobs[r] (made from job by the case) as rank
// r, with wire called on the jobs first.
type strategyCase struct {
	name  string
	job   Job
	order []Point // the points of a step, in the strategy's order
	run   func(t *testing.T, jobs []Job) ([]*Summary, []error)
}

var (
	ringOrder   = []Point{AfterGradient, BeforeCombine, AfterUpdate}
	gossipOrder = []Point{AfterGradient, AfterUpdate, BeforeCombine}
)

func strategyCases(t *testing.T) []strategyCase {
	mn := synthMNIST(480, 40, 12)
	dense := testJob(t, nn.Softmax, mn, 16, 1)
	dense.HashEvery, dense.MeasureWait = 0, false
	const dim = 200
	sp := sparseTestJob(sparseSet(t, 1, 320, dim, 5), nil, dim, 16, 1, "adagrad", sparse.ExchangeSparse)
	sp.HashEvery = 0
	gossip := Gossip{Schedule: "rotate"}
	ring := func(t *testing.T, jobs []Job) ([]*Summary, []error) { return runGroup(t, jobs) }
	gossipRun := func(t *testing.T, jobs []Job) ([]*Summary, []error) { return runGossipGroup(t, jobs, nil) }
	sparseRing := func(t *testing.T, jobs []Job) ([]*Summary, []error) {
		sums, _, errs := runSparse(t, jobs)
		return sums, errs
	}
	dg, sg := dense, cloneSparse(sp)
	dg.Strategy, sg.Strategy = gossip, gossip
	// The ring measures waiting with a barrier between AfterGradient and
	// BeforeCombine: have it.
	dense.MeasureWait = true
	return []strategyCase{
		{"dense/ring", dense, ringOrder, ring},
		{"dense/gossip", dg, gossipOrder, gossipRun},
		{"sparse/ring", sp, ringOrder, sparseRing},
		{"sparse/gossip", sg, gossipOrder, gossipRun},
	}
}

// TestFaultsHookOrder: under both strategies, for dense and sparse
// models, Faults.Hook is called on every replica at the three points of
// every local step, in the strategy's documented order (ring:
// AfterGradient, BeforeCombine, AfterUpdate; gossip: AfterGradient,
// AfterUpdate, BeforeCombine), with the rank, the 0-based local step and
// the step's start; an error it returns ends the run with that error, on
// every replica that returns it, and no later point is reached.
func TestFaultsHookOrder(t *testing.T) {
	const n = 2
	for _, tc := range strategyCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([][]hookCall, n)
			jobs := same(n, tc.job)
			for r := range jobs {
				jobs[r] = cloneSparse(jobs[r])
				jobs[r].Faults.Hook = func(_ context.Context, p Point, s StepInfo) error {
					calls[r] = append(calls[r], hookCall{p, s.Rank, s.Step, s.Started})
					return nil
				}
			}
			sums, errs := tc.run(t, jobs)
			total := 0
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				steps := sums[r].Peer.Steps
				total += steps
				if len(calls[r]) != len(tc.order)*steps {
					t.Fatalf("rank %d: %d hook calls for %d local steps, want %d: %v", r, len(calls[r]), steps, len(tc.order)*steps, calls[r])
				}
				var last time.Time
				for i, c := range calls[r] {
					step, p := i/len(tc.order), tc.order[i%len(tc.order)]
					if c.p != p || c.step != step || c.rank != r {
						t.Fatalf("rank %d: call %d is rank %d's %v, want rank %d's %v step %d (calls %v)", r, i, c.rank, c, r, p, step, calls[r])
					}
					first := calls[r][step*len(tc.order)].started
					if c.started.IsZero() || !c.started.Equal(first) || c.started.Before(last) {
						t.Fatalf("rank %d: %v started at %v (the step's first point: %v, the previous step: %v)", r, c, c.started, first, last)
					}
					last = c.started
				}
			}
			if total == 0 {
				t.Fatal("no steps: the test proves nothing")
			}
		})
	}

	// An error from the hook ends the run with it. Every replica fails at
	// the same point, so that none waits for another (a lone failure is
	// the kill tests' business).
	fail := map[string]struct {
		p    Point
		step int
	}{
		"dense/ring":    {BeforeCombine, 2},
		"dense/gossip":  {BeforeCombine, 0}, // before any average: no peer is left waiting for one
		"sparse/ring":   {AfterUpdate, 1},
		"sparse/gossip": {AfterGradient, 0},
	}
	for _, tc := range strategyCases(t) {
		t.Run(tc.name+"/error", func(t *testing.T) {
			at := fail[tc.name]
			boom := errors.New("the hook says stop")
			calls := make([][]hookCall, n)
			jobs := same(n, tc.job)
			for r := range jobs {
				jobs[r] = cloneSparse(jobs[r])
				jobs[r].Faults.Hook = func(_ context.Context, p Point, s StepInfo) error {
					calls[r] = append(calls[r], hookCall{p, s.Rank, s.Step, s.Started})
					if p == at.p && s.Step == at.step {
						return fmt.Errorf("rank %d: %w", s.Rank, boom)
					}
					return nil
				}
			}
			sums, errs := tc.run(t, jobs)
			for r, err := range errs {
				if !errors.Is(err, boom) || sums[r] != nil {
					t.Errorf("rank %d: %v (summary %v), want the hook's error", r, err, sums[r])
				}
				want := at.step*len(tc.order) + slices.Index(tc.order, at.p) + 1
				if len(calls[r]) != want || calls[r][want-1].p != at.p || calls[r][want-1].step != at.step {
					t.Errorf("rank %d: hook calls %v, want them to end at %v step %d", r, calls[r], at.p, at.step)
				}
			}
		})
	}
}

// slowDelay records the delays asked of rank r's Faults and waits a
// little of each (up to 2 ms), so that the straggler really is late.
type slowDelay struct {
	mu     sync.Mutex
	asked  map[int][]time.Duration
	waited time.Duration
}

func (s *slowDelay) on(r int) func(ctx context.Context, d time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		w := min(d, 2*time.Millisecond)
		s.mu.Lock()
		s.asked[r] = append(s.asked[r], d)
		s.waited += w
		s.mu.Unlock()
		select {
		case <-time.After(w):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sparseFaultCases are the synchronous sparse exchanges the fault tests
// run through: the sparse all-gather, direct and around a ring, and the
// dense all-reduce.
var sparseFaultCases = []struct {
	name   string
	exch   sparse.Exchange
	gather string
}{
	{"sparse-direct", sparse.ExchangeSparse, GatherDirect},
	{"sparse-ring", sparse.ExchangeSparse, GatherRing},
	{"dense", sparse.ExchangeDense, ""},
}

// TestSparseRingSlowPeer: a straggler (Faults.SlowRank, SlowFactor) in a
// synchronous sparse run of 3 replicas asks for its delay once per step,
// on its rank only, and changes nothing in the arithmetic: every replica
// ends with the weights of the run without it, bit for bit.
func TestSparseRingSlowPeer(t *testing.T) {
	const n, dim = 3, 300
	train := sparseSet(t, 1, 600, dim, 6)
	for _, tc := range sparseFaultCases {
		t.Run(tc.name, func(t *testing.T) {
			job := sparseTestJob(train, nil, dim, 8, 2, "adagrad", tc.exch)
			job.Sparse.Gather = tc.gather
			ref, _, errs := runSparse(t, sameSparse(n, job))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			slow := &slowDelay{asked: map[int][]time.Duration{}}
			sums, _, errs := runSparseOn(t, sameSparse(n, job), func(_ *collective.MemNetwork, jobs []Job) {
				for r := range jobs {
					jobs[r].Faults = Faults{SlowRank: 1, SlowFactor: 3, Delay: slow.on(r)}
				}
			}, nil)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			steps := sums[1].Peer.Steps
			if want := 2 * 600 / (n * 8); steps != want {
				t.Fatalf("the straggler ran %d steps, want %d", steps, want)
			}
			if len(slow.asked[1]) != steps || len(slow.asked[0]) != 0 || len(slow.asked[2]) != 0 {
				t.Errorf("delays asked per rank: %d, %d, %d; want %d on rank 1 only", len(slow.asked[0]), len(slow.asked[1]), len(slow.asked[2]), steps)
			}
			for i, d := range slow.asked[1] {
				if d <= 0 {
					t.Errorf("step %d: delay %v asked", i, d)
				}
			}
			for r, s := range sums {
				if s.Run.ParamsSHA256 != ref[0].Run.ParamsSHA256 || s.Run.Steps != ref[0].Run.Steps {
					t.Errorf("rank %d with a straggler: %.12s… after %d steps; without: %.12s… after %d", r, s.Run.ParamsSHA256, s.Run.Steps, ref[0].Run.ParamsSHA256, ref[0].Run.Steps)
				}
			}
			t.Logf("the straggler waited %v in all over %d steps", slow.waited, steps)
		})
	}
}

// TestSparseRingKilledPeer: a replica killed mid-run (Faults.KillRank,
// KillAfter, Kill cutting its links) in a synchronous sparse run returns
// ErrInjectedKill after its KillAfter-th step, and the others fail
// promptly with an error naming it instead of waiting for it.
func TestSparseRingKilledPeer(t *testing.T) {
	const n, dim = 3, 300
	train := sparseSet(t, 1, 600, dim, 6)
	for _, tc := range sparseFaultCases {
		t.Run(tc.name, func(t *testing.T) {
			job := sparseTestJob(train, nil, dim, 8, 2, "adagrad", tc.exch)
			job.Sparse.Gather = tc.gather
			start := time.Now()
			var steps [n]atomic.Int64
			_, _, errs := runSparseOn(t, sameSparse(n, job), func(net *collective.MemNetwork, jobs []Job) {
				for r := range jobs {
					jobs[r].Faults = Faults{KillRank: 2, KillAfter: 3, Kill: func() { net.Kill(2) },
						Hook: func(_ context.Context, p Point, s StepInfo) error {
							if p == AfterUpdate {
								steps[r].Add(1)
							}
							return nil
						}}
				}
			}, nil)
			if !errors.Is(errs[2], ErrInjectedKill) || !strings.Contains(errs[2].Error(), "rank 2 after 3 local steps") {
				t.Errorf("rank 2: %v, want the injected kill after 3 local steps", errs[2])
			}
			for r := range 2 {
				switch err := errs[r]; {
				case err == nil || errors.Is(err, ErrInjectedKill) || errors.Is(err, context.DeadlineExceeded):
					t.Errorf("rank %d: %v, want the dead peer's error", r, err)
				case !strings.Contains(err.Error(), "rank 2"):
					t.Errorf("rank %d: %v, want an error naming rank 2", r, err)
				}
				// Rank 2 may leave step 3's exchange (around a ring) before
				// the others are done with it, and its links go down then:
				// the survivors end in step 3 or 4, never later.
				if s := steps[r].Load(); s < 2 || s > 4 {
					t.Errorf("rank %d finished %d steps, want 2 to 4 (the dead peer did 3)", r, s)
				}
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the survivors took %v to notice", d)
			}
		})
	}
}

// countingGroup counts the collectives a replica calls on the Group Run
// was given.
type countingGroup struct {
	Group
	gathers, reduces, rings atomic.Int64
}

func (g *countingGroup) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	g.gathers.Add(1)
	return g.Group.AllGather(ctx, local)
}

func (g *countingGroup) AllReduceSum(ctx context.Context, buf []float32) error {
	g.reduces.Add(1)
	return g.Group.AllReduceSum(ctx, buf)
}

func (g *countingGroup) Traffic() (int64, int64) {
	if t, ok := g.Group.(Traffic); ok {
		return t.Traffic()
	}
	return 0, 0
}

func (g *countingGroup) counts() [3]int64 {
	return [3]int64{g.gathers.Load(), g.reduces.Load(), g.rings.Load()}
}

// ringCountingGroup is a countingGroup with the ring all-gather.
type ringCountingGroup struct{ *countingGroup }

func (g ringCountingGroup) GatherRing(ctx context.Context, local []byte) ([][]byte, error) {
	g.rings.Add(1)
	return g.Group.(replica.RingGatherer).GatherRing(ctx, local)
}

// TestSparseCombineUsesGivenGroup: a synchronous sparse replica
// combines over the Group given to Run (here one that counts its calls):
// each step's exchange is one call of the collective its mode uses, made
// between BeforeCombine and AfterUpdate. A ring gather on a Group without
// one is an error saying so, not a silent direct gather.
func TestSparseCombineUsesGivenGroup(t *testing.T) {
	const n, dim = 3, 300
	train := sparseSet(t, 1, 600, dim, 6)
	for _, tc := range []struct {
		exch   sparse.Exchange
		gather string
		ring   bool     // the group has the ring all-gather
		step   [3]int64 // AllGather, AllReduceSum, gatherRing calls per exchange
		want   string   // the run's error, if any
	}{
		{sparse.ExchangeSparse, GatherDirect, true, [3]int64{1, 0, 0}, ""},
		{sparse.ExchangeSparse, GatherRing, true, [3]int64{0, 0, 1}, ""},
		{sparse.ExchangeDense, "", true, [3]int64{0, 1, 0}, ""},
		{sparse.ExchangeDense, GatherRing, false, [3]int64{0, 1, 0}, ""}, // the dense exchange gathers nothing
		{sparse.ExchangeSparse, GatherRing, false, [3]int64{}, "sparse gather ring: this group (*mirrored.countingGroup) has no ring all-gather: use direct"},
	} {
		t.Run(fmt.Sprintf("%s/%s/ring=%v", tc.exch, tc.gather, tc.ring), func(t *testing.T) {
			job := sparseTestJob(train, nil, dim, 8, 1, "adagrad", tc.exch)
			job.Sparse.Gather = tc.gather
			groups := make([]*countingGroup, n)
			var mu sync.Mutex
			var bad []string
			sums, _, errs := runSparseOn(t, sameSparse(n, job), func(_ *collective.MemNetwork, jobs []Job) {
				for r := range jobs {
					var before [3]int64
					jobs[r].Faults.Hook = func(_ context.Context, p Point, s StepInfo) error {
						switch p {
						case BeforeCombine:
							before = groups[r].counts()
						case AfterUpdate:
							after := groups[r].counts()
							if d := [3]int64{after[0] - before[0], after[1] - before[1], after[2] - before[2]}; d != tc.step {
								mu.Lock()
								bad = append(bad, fmt.Sprintf("rank %d step %d: %v calls (gather, all-reduce, ring gather)", r, s.Step, d))
								mu.Unlock()
							}
						}
						return nil
					}
				}
			}, func(r int, g Group) Group {
				groups[r] = &countingGroup{Group: g}
				if tc.ring {
					return ringCountingGroup{groups[r]}
				}
				return groups[r]
			})
			if tc.want != "" {
				for r, err := range errs {
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("rank %d: %v, want %q", r, err, tc.want)
					}
				}
				return
			}
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if len(bad) > 0 {
				t.Errorf("each exchange should be %v calls:\n%s", tc.step, strings.Join(bad, "\n"))
			}
			for r, g := range groups {
				steps := int64(sums[r].Peer.Steps)
				c := g.counts()
				// Beyond the steps: the handshake and hash comparisons gather.
				if steps == 0 || c[0] < tc.step[0]*steps+1 || c[1] < tc.step[1]*steps || c[2] != tc.step[2]*steps {
					t.Errorf("rank %d: %v calls (gather, all-reduce, ring gather) over %d steps, want at least %v per step", r, c, steps, tc.step)
				}
				if sums[r].Peer.BytesSent <= 0 {
					t.Errorf("rank %d: %d bytes sent through the wrapped group's Traffic", r, sums[r].Peer.BytesSent)
				}
			}
		})
	}
}

// TestGossipNeedsCommGroup: gossip replicas talk pairwise over the
// collective.Comm, so a gossip Run on any other Group (one replica's
// LocalGroup, a wrapped Group) fails at once saying so, and Train (one
// worker) refuses gossip, for dense and sparse models alike.
func TestGossipNeedsCommGroup(t *testing.T) {
	dense := testJob(t, nn.Softmax, synthMNIST(64, 16, 1), 16, 1)
	dense.HashEvery, dense.MeasureWait = 0, false
	sp := sparseTestJob(sparseSet(t, 1, 64, 50, 3), nil, 50, 8, 1, "adagrad", sparse.ExchangeSparse)
	c, err := collective.New(collective.NewMemNetwork(1).Transport(0), collective.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, model := range []struct {
		name string
		job  Job
	}{{"dense", dense}, {"sparse", sp}} {
		job := model.job
		job.Strategy = Gossip{}
		for _, tc := range []struct {
			group string
			run   func() (*Summary, error)
			want  []string
		}{
			{"LocalGroup", func() (*Summary, error) { return Run(ctx, job, LocalGroup{}) },
				[]string{"strategy gossip on a replica.LocalGroup", "NewGroup", "use the ring"}},
			{"wrapped", func() (*Summary, error) { return Run(ctx, job, &countingGroup{Group: NewGroup(c)}) },
				[]string{"strategy gossip on a *mirrored.countingGroup", "NewGroup"}},
			{"Train", func() (*Summary, error) { return Train(ctx, job) },
				[]string{"strategy gossip with one worker", "nobody to gossip with"}},
		} {
			sum, err := tc.run()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%s gossip on %s: %v, want an error mentioning %q", model.name, tc.group, err, w)
				}
			}
			if sum != nil {
				t.Errorf("%s gossip on %s: a summary", model.name, tc.group)
			}
		}
		// The same job under the ring runs alone.
		job.Strategy = Ring{}
		if sum, err := Train(ctx, job); err != nil || sum.Gossip != nil || sum.Run.Steps == 0 {
			t.Errorf("%s ring alone: %+v, %v", model.name, sum, err)
		}
	}
}

// TestRunChecksFaultRanks: Job.Validate, knowing no group, accepts a
// fault on any rank ≥ 0; Run checks the ranks against its group and
// every replica stops at start-up naming the bad one.
func TestRunChecksFaultRanks(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(64, 16, 1), 16, 1)
	for _, tc := range []struct {
		f    Faults
		want string
	}{
		{Faults{KillRank: 5, KillAfter: 1}, "--kill-rank 5: want a rank in [0,2)"},
		{Faults{SlowRank: 2, SlowFactor: 2}, "--slow-peer rank 2: want a rank in [0,2)"},
	} {
		job.Faults = tc.f
		if err := job.Validate(); err != nil {
			t.Errorf("%+v: Validate: %v", tc.f, err)
		}
		sums, errs := runGroup(t, same(2, job))
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) || sums[r] != nil {
				t.Errorf("%+v: rank %d: %v, want %q", tc.f, r, err, tc.want)
			}
		}
	}
}
