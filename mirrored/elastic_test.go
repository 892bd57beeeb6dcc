package mirrored

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/sparse"
)

// memCluster is an in-memory network for elastic runs: a generation is
// a collective.MemNetwork formed once all its members asked for it, and
// the membership protocol's questions are calls to the peer's answer.
type memCluster struct {
	n      int
	mu     sync.Mutex
	gens   map[uint64]*memGen
	answer []func(int, []byte) []byte
	dead   []bool
}

type memGen struct {
	members []int
	net     *collective.MemNetwork
	ready   chan struct{}
	arrived int
}

func newMemCluster(n int) *memCluster {
	return &memCluster{n: n, gens: map[uint64]*memGen{}, answer: make([]func(int, []byte) []byte, n), dead: make([]bool, n)}
}

// kill makes peer p dead: its links in every generation fail and it
// answers nothing.
func (c *memCluster) kill(p int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead[p] = true
	for _, g := range c.gens {
		if r := slices.Index(g.members, p); r >= 0 {
			g.net.Kill(r)
		}
	}
}

// memPeer is peer self's Membership of a memCluster.
type memPeer struct {
	c    *memCluster
	self int
}

func (p *memPeer) Self() int { return p.self }
func (p *memPeer) Size() int { return p.c.n }

func (p *memPeer) Form(ctx context.Context, gen uint64, members []int) (Group, func(bool) error, error) {
	c := p.c
	c.mu.Lock()
	g := c.gens[gen]
	switch {
	case g == nil:
		g = &memGen{members: slices.Clone(members), net: collective.NewMemNetwork(len(members)), ready: make(chan struct{})}
		c.gens[gen] = g
	case !slices.Equal(g.members, members):
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("generation %d: members %v, another peer formed it with %v", gen, members, g.members)
	}
	if g.arrived++; g.arrived == len(members) {
		close(g.ready)
	}
	c.mu.Unlock()
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("generation %d: waiting for its members: %w", gen, ctx.Err())
	}
	comm, err := collective.New(g.net.Transport(slices.Index(members, p.self)), collective.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	return NewGroup(comm), func(bool) error { return nil }, nil
}

func (p *memPeer) Ask(ctx context.Context, to int, msg []byte) ([]byte, error) {
	p.c.mu.Lock()
	a, dead := p.c.answer[to], p.c.dead[to] || p.c.dead[p.self]
	p.c.mu.Unlock()
	if a == nil || dead {
		return nil, fmt.Errorf("peer %d does not answer", to)
	}
	return a(p.self, msg), ctx.Err()
}

func (p *memPeer) Serve(answer func(int, []byte) []byte) {
	p.c.mu.Lock()
	p.c.answer[p.self] = answer
	p.c.mu.Unlock()
}

// runElasticGroup runs jobs[i] as peer i of an elastic in-memory cluster
// (with Elastic set from el, its Membership the cluster's), calling
// kill(i) for each peer i whose job's faults kill it.
func runElasticGroup(t *testing.T, jobs []Job, el Elastic) ([]*Summary, []error) {
	t.Helper()
	return runElasticOn(t, newMemCluster(len(jobs)), jobs, el)
}

// runElasticOn is runElasticGroup on the cluster c.
func runElasticOn(t *testing.T, c *memCluster, jobs []Job, el Elastic) ([]*Summary, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sums, errs := make([]*Summary, len(jobs)), make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		e := el
		e.Membership = &memPeer{c: c, self: i}
		if e.Timeout == 0 {
			e.Timeout = 5 * time.Second
		}
		job.Strategy = &e
		if job.Faults.KillAfter > 0 && job.Faults.KillRank == i {
			job.Faults.Kill = func() { c.kill(i) }
		}
		wg.Go(func() { sums[i], errs[i] = Run(ctx, job, nil) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the peers did not finish within two minutes: %v", errors.Join(errs...))
	}
	return sums, errs
}

// TestElasticInMemory: of 3 replicas, peer 1 dies at its 7th step; the
// two others agree, roll back to the chief's last commit, re-shard and
// finish with the same parameters, and the record names who left, from
// which step. Replaying that record (peer 1 leaving at the recorded
// step, on purpose) ends with the same parameters, bit for bit; and a
// run that loses nobody records no change.
func TestElasticInMemory(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	jobs := make([]Job, 3)
	for i := range jobs {
		jobs[i] = testJob(t, "softmax", mn, 16, 2)
		jobs[i].Faults.KillRank, jobs[i].Faults.KillAfter = 1, 7
	}
	sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3})
	if !errors.Is(errs[1], ErrInjectedKill) {
		t.Fatalf("peer 1: %v, want the injected kill", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("peer %d: %v", i, errs[i])
		}
	}
	rec := sums[0].Run
	if sums[2].Run.ParamsSHA256 != rec.ParamsSHA256 {
		t.Errorf("the survivors differ: %s and %s", rec.ParamsSHA256, sums[2].Run.ParamsSHA256)
	}
	if len(rec.Membership) != 1 || !slices.Equal(rec.Membership[0].Left, []int{1}) || !slices.Equal(rec.Membership[0].Members, []int{0, 2}) ||
		rec.Membership[0].Step%3 != 0 || rec.Replicas != 2 {
		t.Fatalf("record %+v on %d replicas: want peer 1 gone from a commit (every 3 steps), 2 replicas", rec.Membership, rec.Replicas)
	}
	t.Logf("record %+v", rec.Membership)

	for i := range jobs {
		jobs[i].Faults = Faults{}
	}
	sums, errs = runElasticGroup(t, jobs, Elastic{CommitEvery: 3, Schedule: rec.Membership})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replay, peer %d: %v", i, err)
		}
	}
	if sums[0].Run.ParamsSHA256 != rec.ParamsSHA256 || sums[2].Run.ParamsSHA256 != rec.ParamsSHA256 {
		t.Errorf("the replay ended with %s and %s, the recorded run with %s", sums[0].Run.ParamsSHA256, sums[2].Run.ParamsSHA256, rec.ParamsSHA256)
	}
	if sums[1].Peer.Left == "" {
		t.Errorf("peer 1 of the replay: %+v, want it to say it left", sums[1].Peer)
	}

	sums, errs = runElasticGroup(t, jobs, Elastic{CommitEvery: 3})
	for i, err := range errs {
		if err != nil || len(sums[i].Run.Membership) != 0 || sums[i].Run.Replicas != 3 {
			t.Fatalf("no loss, peer %d: %v, %+v", i, err, sums[i].Run.Membership)
		}
	}
}

// TestElasticReviewCases: what an adversarial review found, each a case
// that failed before its fix: a join request from a worker that died
// again made every later commit a change; a peer the schedule drops for
// good at step 0 waited out the run; a change recorded at a step that is
// not a commit was never applied; a schedule listing a newcomer first
// (a chief without the state) looped.
func TestElasticReviewCases(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	jobs := func() []Job {
		js := make([]Job, 3)
		for i := range js {
			js[i] = testJob(t, "softmax", mn, 16, 2)
		}
		return js
	}
	t.Run("stale join", func(t *testing.T) {
		js := jobs()
		c := newMemCluster(3)
		for i := range js {
			js[i].Faults.KillRank, js[i].Faults.KillAfter = 2, 4
		}
		// Long after peer 2 died, peer 0 hears it ask to join, once.
		js[0].Faults.Hook = func(_ context.Context, p Point, st StepInfo) error {
			if p == AfterUpdate && st.Step == 8 {
				c.mu.Lock()
				answer := c.answer[0]
				c.mu.Unlock()
				answer(2, mustJSON(wireMsg{Kind: membership.Join}))
			}
			return nil
		}
		sums, errs := runElasticOn(t, c, js, Elastic{CommitEvery: 3})
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("%v", errs)
		}
		if ms := sums[0].Run.Membership; len(ms) != 1 {
			t.Errorf("record %+v: want the one loss, not a change at every commit for a joiner that is gone", ms)
		}
	})
	t.Run("dropped at step 0 for good", func(t *testing.T) {
		sums, errs := runElasticGroup(t, jobs(), Elastic{CommitEvery: 3, Schedule: []MembershipChange{{Step: 0, Members: []int{0, 2}}}})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("peer %d: %v", i, err)
			}
		}
		if sums[1].Peer.Left == "" || sums[0].Run.Replicas != 2 {
			t.Errorf("peer 1 %+v, the run on %d replicas", sums[1].Peer, sums[0].Run.Replicas)
		}
	})
	t.Run("a change between commits", func(t *testing.T) {
		sums, errs := runElasticGroup(t, jobs(), Elastic{CommitEvery: 3, Schedule: []MembershipChange{{Step: 5, Members: []int{0, 2}}}})
		if errs[0] != nil || errs[2] != nil || sums[0].Run.Replicas != 2 || len(sums[0].Run.Membership) != 1 || sums[0].Run.Membership[0].Step != 6 {
			t.Errorf("%v; %+v: want the change applied at the next commit (step 6)", errs, sums[0].Run.Membership)
		}
	})
	for _, tc := range []struct {
		s   []MembershipChange
		err string
	}{
		{[]MembershipChange{{Step: 0, Members: []int{1, 2}}, {Step: 6, Members: []int{0, 1, 2}}}, "lists peer 1, which stays, after a peer that joins"},
		{[]MembershipChange{{Step: 6, Members: []int{0, 2}, CommitEvery: 5}}, "recorded with --commit-every 5"},
		{[]MembershipChange{{Step: 6, Members: []int{0, 3}}}, "outside the cluster's 3"},
		{[]MembershipChange{{Step: 6, Members: []int{0, 2}}, {Step: 9, Members: []int{0, 2, 1}}}, ""},
	} {
		if err := membership.CheckSchedule(tc.s, 3, 3); (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.err)
		}
	}
}

// TestElasticSparseCommits: sparse-lr commits are a mark in an undo log
// of the values its steps overwrite (SGD with lazy L2, whose settling
// changes every weight, copies instead). A run that loses a peer (its
// survivors roll back through the log) ends, for AdaGrad, FTRL (whose
// state is interleaved) and SGD, with the parameters of its record's
// replay made with copies: the log held every change (without the
// logging, AdaGrad's and FTRL's cases fail).
func TestElasticSparseCommits(t *testing.T) {
	const dim = 4000
	train, test := sparseSet(t, 1, 1200, dim, 8), sparseSet(t, 2, 300, dim, 8)
	for _, opt := range []string{"adagrad", "ftrl", "sgd"} {
		t.Run(opt, func(t *testing.T) {
			jobs := make([]Job, 3)
			for i := range jobs {
				jobs[i] = cloneSparse(sparseTestJob(train, test, dim, 16, 2, opt, sparse.ExchangeAuto))
				jobs[i].Faults.KillRank, jobs[i].Faults.KillAfter = 1, 11
			}
			sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 4})
			if errs[0] != nil || errs[2] != nil {
				t.Fatalf("%v", errs)
			}
			rec := sums[0].Run
			if len(rec.Membership) != 1 || rec.Membership[0].RolledBack == 0 && rec.Membership[0].Step%4 != 0 {
				t.Fatalf("record %+v", rec.Membership)
			}
			for i := range jobs {
				jobs[i].Faults = Faults{}
			}
			fullCommits = true
			defer func() { fullCommits = false }()
			sums, errs = runElasticGroup(t, jobs, Elastic{CommitEvery: 4, Schedule: rec.Membership})
			if errs[0] != nil || sums[0].Run.ParamsSHA256 != rec.ParamsSHA256 {
				t.Errorf("replayed with full commits: %v, %s; the run with incremental ones: %s", errs[0], sums[0].Run.ParamsSHA256, rec.ParamsSHA256)
			}
		})
	}
}

// gen0TimeoutPeer is a memPeer whose first generation's Form gives up
// after d, as the real Form does after the collective timeout.
type gen0TimeoutPeer struct {
	*memPeer
	deadline time.Time
	settle   bool
}

func (p *gen0TimeoutPeer) Form(ctx context.Context, gen uint64, members []int) (Group, func(bool) error, error) {
	if gen == 0 {
		c, cancel := context.WithDeadline(ctx, p.deadline)
		defer cancel()
		return p.memPeer.Form(c, gen, members)
	}
	return p.memPeer.Form(ctx, gen, members)
}

// Ask, just after the first Form gave up, waits a moment: both peers
// are then agreeing (not one still forming, which answers "starting").
func (p *gen0TimeoutPeer) Ask(ctx context.Context, to int, msg []byte) ([]byte, error) {
	if p.settle && time.Now().After(p.deadline) && time.Now().Before(p.deadline.Add(time.Second)) {
		time.Sleep(200 * time.Millisecond)
	}
	return p.memPeer.Ask(ctx, to, msg)
}

// TestElasticFirstGenerationWithoutAPeer: peer 2 is late: generation 0
// over [0 1 2] does not form, [0 1] trains, peer 2 joins later (and, in
// the second case, peer 1 is lost after). The record (a change at step 0
// for the first generation) lets a replay reproduce the run bit for bit;
// before, the replay started with all 3 and ended elsewhere (found by
// review).
func TestElasticFirstGenerationWithoutAPeer(t *testing.T) {
	t.Run("join", func(t *testing.T) { firstGenerationWithoutAPeer(t, false) })
	t.Run("join then loss", func(t *testing.T) { firstGenerationWithoutAPeer(t, true) })
}

func firstGenerationWithoutAPeer(t *testing.T, killLater bool) {
	mn := synthMNIST(600, 100, 3)
	c := newMemCluster(3)
	jobs := make([]Job, 3)
	for i := range jobs {
		jobs[i] = testJob(t, "softmax", mn, 16, 2)
		if killLater {
			jobs[i].Faults.KillRank, jobs[i].Faults.KillAfter = 1, 22
		}
		jobs[i].Faults.Hook = func(_ context.Context, p Point, _ StepInfo) error {
			if p == AfterUpdate {
				time.Sleep(60 * time.Millisecond)
			}
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sums, errs := make([]*Summary, 3), make([]error, 3)
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	for i, job := range jobs {
		e := Elastic{CommitEvery: 3, Membership: &gen0TimeoutPeer{&memPeer{c: c, self: i}, deadline, true}, Timeout: 5 * time.Second}
		job.Strategy = &e
		if job.Faults.KillAfter > 0 && job.Faults.KillRank == i {
			job.Faults.Kill = func() { c.kill(i) }
		}
		wg.Go(func() {
			if i == 2 {
				time.Sleep(2500 * time.Millisecond)
			}
			sums[i], errs[i] = Run(ctx, job, nil)
		})
	}
	wg.Wait()
	if err := errors.Join(errs[0], errs[2]); err != nil {
		t.Fatal(err)
	}
	rec := sums[0].Run
	t.Logf("recorded: %d replicas at the end, record %+v, hash %s", rec.Replicas, rec.Membership, rec.ParamsSHA256)
	if len(rec.Membership) == 0 {
		t.Fatalf("peer 2 never joined: slow the run down")
	}
	b, _ := json.Marshal(sums[0])
	if _, err := membership.ParseSchedule(b); err != nil {
		t.Errorf("the run's own summary as --membership-schedule: %v", err)
	}
	for i := range jobs {
		jobs[i].Faults = Faults{}
	}
	rs, rerrs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3, Schedule: rec.Membership})
	if err := errors.Join(rerrs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("replay: %d replicas at the end, record %+v, hash %s", rs[0].Run.Replicas, rs[0].Run.Membership, rs[0].Run.ParamsSHA256)
	if rs[0].Run.ParamsSHA256 != rec.ParamsSHA256 {
		t.Errorf("the replay of the record ends with other parameters: %s, recorded %s", rs[0].Run.ParamsSHA256, rec.ParamsSHA256)
	}
}

// TestElasticFirstFormStaggered: peer 2 never comes; peers 0 and 1
// started half a second apart, so their first Form times out half a
// second apart (the real Form's timeout runs from each peer's start).
// Peer 0, agreeing first, counts peer 1 (still waiting for the first
// generation) as there: the two train; before, each stopped alone for
// want of a majority (found by review).
func TestElasticFirstFormStaggered(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	c := newMemCluster(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 2 {
		job := testJob(t, "softmax", mn, 16, 1)
		e := Elastic{CommitEvery: 3, Membership: &gen0TimeoutPeer{&memPeer{c: c, self: i}, start.Add(time.Duration(2+i) * 500 * time.Millisecond), false}, Timeout: 5 * time.Second}
		job.Strategy = &e
		wg.Go(func() { _, errs[i] = Run(ctx, job, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("peer %d: %v (deliberate stop: %v)", i, err, errors.Is(err, ErrElasticStopped))
		}
	}
}

// TestElasticRecordStepsGoBack: peer 2 dies and is restarted (admitted at
// a commit: 3 peers again, fewer steps per epoch), then peer 1 dies soon
// after, so the record's steps go back. The run's own summary parses as
// a membership schedule, and replays bit for bit (found by review).
func TestElasticRecordStepsGoBack(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	c := newMemCluster(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	slow := func(_ context.Context, p Point, _ StepInfo) error {
		if p == AfterUpdate {
			time.Sleep(60 * time.Millisecond)
		}
		return nil
	}
	mk := func(i, killRank, killAfter int) Job {
		job := testJob(t, "softmax", mn, 16, 2)
		job.Faults.Hook = slow
		if killAfter > 0 {
			job.Faults.KillRank, job.Faults.KillAfter = killRank, killAfter
			job.Faults.Kill = func() { c.kill(i) }
		}
		e := Elastic{CommitEvery: 3, Membership: &memPeer{c: c, self: i}, Timeout: 5 * time.Second}
		job.Strategy = &e
		return job
	}
	sums, errs := make([]*Summary, 3), make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { sums[0], errs[0] = Run(ctx, mk(0, 0, 0), nil) })
	j1 := mk(1, 0, 0)
	after := 0
	j1.Faults.Hook = func(ctx context.Context, p Point, st StepInfo) error {
		if p != AfterUpdate {
			return nil
		}
		time.Sleep(60 * time.Millisecond)
		c.mu.Lock()
		g := c.gens[2]
		c.mu.Unlock()
		if g != nil && len(g.members) == 3 {
			if after++; after == 1 {
				c.kill(1)
				return ErrInjectedKill
			}
		}
		return nil
	}
	wg.Go(func() { sums[1], errs[1] = Run(ctx, j1, nil) })
	wg.Go(func() {
		_, err := Run(ctx, mk(2, 2, 5), nil)
		t.Logf("peer 2's first life: %v", err)
		time.Sleep(200 * time.Millisecond)
		c.mu.Lock()
		c.dead[2] = false
		c.mu.Unlock()
		sums[2], errs[2] = Run(ctx, mk(2, 0, 0), nil)
	})
	wg.Wait()
	t.Logf("errors %v", errs)
	if sums[0] == nil {
		t.Fatal(errs[0])
	}
	for _, ch := range sums[0].Run.Membership {
		t.Logf("change: step %d gen %d members %v left %v joined %v", ch.Step, ch.Generation, ch.Members, ch.Left, ch.Joined)
	}
	b, _ := json.Marshal(sums[0])
	if _, err := membership.ParseSchedule(b); err != nil {
		t.Errorf("the run's own summary as --membership-schedule: %v", err)
	}
	jobs := make([]Job, 3)
	for i := range jobs {
		jobs[i] = testJob(t, "softmax", mn, 16, 2)
	}
	// Nobody fails in a replay: a long timeout keeps a loaded machine (a
	// dropped peer waiting 5 s to be taken back) from failing it.
	rs, rerrs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3, Schedule: sums[0].Run.Membership, Timeout: 30 * time.Second})
	if err := rerrs[0]; err != nil {
		t.Errorf("replay: %v", err)
	} else if rs[0].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
		t.Errorf("replay: %d changes; parameters %s, recorded %s", len(rs[0].Run.Membership), rs[0].Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
	}
}

// TestElasticSparseTwoLosses: two losses, the second one step into the
// next generation (rolled back to the mark its start took), with the
// dense and auto exchanges; the replay with full copies must match.
func TestElasticSparseTwoLosses(t *testing.T) {
	const dim = 4000
	train, test := sparseSet(t, 1, 1600, dim, 8), sparseSet(t, 2, 300, dim, 8)
	for _, opt := range []string{"adagrad", "ftrl"} {
		for _, x := range []sparse.Exchange{sparse.ExchangeDense, sparse.ExchangeAuto} {
			t.Run(fmt.Sprint(opt, x), func(t *testing.T) {
				jobs := make([]Job, 4)
				for i := range jobs {
					jobs[i] = cloneSparse(sparseTestJob(train, test, dim, 16, 2, opt, x))
				}
				jobs[1].Faults.KillRank, jobs[1].Faults.KillAfter = 1, 11
				jobs[2].Faults.KillRank, jobs[2].Faults.KillAfter = 2, 13
				sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 4})
				if errs[0] != nil || errs[3] != nil {
					t.Fatalf("%v", errs)
				}
				rec := sums[0].Run
				t.Logf("record %+v", rec.Membership)
				for i := range jobs {
					jobs[i].Faults = Faults{}
				}
				fullCommits = true
				defer func() { fullCommits = false }()
				rs, rerrs := runElasticGroup(t, jobs, Elastic{CommitEvery: 4, Schedule: rec.Membership})
				if rerrs[0] != nil || rs[0].Run.ParamsSHA256 != rec.ParamsSHA256 {
					t.Errorf("replay: %v, %s; recorded %s", rerrs[0], rs[0].Run.ParamsSHA256, rec.ParamsSHA256)
				}
			})
		}
	}
}

// TestElasticStopLeaves: under Elastic, SIGTERM to a peer (its Job.Stop
// closed: a pod evicted, a machine preempted) makes it leave at the next
// commit while the others go on; SIGTERM to every peer stops the run
// after one step, as a plain run does.
func TestElasticStopLeaves(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	jobs := func(stopping ...int) []Job {
		js := make([]Job, 3)
		for i := range js {
			js[i] = testJob(t, "softmax", mn, 16, 2)
			if slices.Contains(stopping, i) {
				stop := make(chan struct{})
				var once sync.Once
				js[i].Stop = stop
				js[i].Faults.Hook = func(_ context.Context, p Point, st StepInfo) error {
					if p == AfterUpdate && st.Step == 4 {
						once.Do(func() { close(stop) })
					}
					return nil
				}
			}
		}
		return js
	}
	sums, errs := runElasticGroup(t, jobs(1), Elastic{CommitEvery: 3})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rec := sums[0].Run
	if !strings.Contains(sums[1].Peer.Left, "asked to stop") || rec.Replicas != 2 || len(rec.Membership) != 1 ||
		!slices.Equal(rec.Membership[0].Left, []int{1}) || !strings.Contains(rec.Membership[0].Reason, "asked to stop") || rec.Stopped != nil {
		t.Errorf("peer 1 %+v; the run on %d replicas, record %+v, stopped %+v", sums[1].Peer, rec.Replicas, rec.Membership, rec.Stopped)
	}
	sums, errs = runElasticGroup(t, jobs(0, 1, 2), Elastic{CommitEvery: 3})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, s := range sums {
		if s.Run.Stopped == nil || len(s.Run.Membership) != 0 || s.Run.Stopped.Step != 6 {
			t.Errorf("peer %d: stopped %+v, record %+v: want every peer stopped after the commit at step 6", i, s.Run.Stopped, s.Run.Membership)
		}
	}
}
