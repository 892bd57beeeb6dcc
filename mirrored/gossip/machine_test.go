package gossip

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// wired is a few machines joined by hand: one FIFO per directed link,
// delivered only when the test says so. No goroutines, no clock.
type wired struct {
	t       *testing.T
	ms      []*machine
	links   map[[2]int][][]byte // [from, to] -> queued messages
	settled [][]Result          // per rank, in the order settled
	left    [][]int             // per rank, peers that left, in order
	updates float64             // sum over every local step of its delta × dimension
}

// start is every machine's start time; deliveries happen a second later.
var start = time.Unix(1_700_000_000, 0)

func newWired(t *testing.T, params [][]float32, opts Options) *wired {
	t.Helper()
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	n := len(params)
	w := &wired{t: t, links: map[[2]int][][]byte{}, settled: make([][]Result, n), left: make([][]int, n)}
	for r := range n {
		m := newMachine(r, n, params[r], opts, zaptest.NewLogger(t).Named("gossip"))
		m.start = start
		w.ms = append(w.ms, m)
	}
	return w
}

// do carries out the effects of an input to rank r.
func (w *wired) do(r int, e effects) {
	for _, s := range e.sends {
		w.links[[2]int{r, s.to}] = append(w.links[[2]int{r, s.to}], s.msg)
	}
	w.left[r] = append(w.left[r], e.left...)
	if e.settled != nil {
		w.settled[r] = append(w.settled[r], e.settled.res)
	}
}

// begin starts rank r's exchange of round.
func (w *wired) begin(r int, round uint64) Result {
	w.t.Helper()
	res, e, err := w.ms[r].begin(round)
	if err != nil {
		w.t.Fatalf("rank %d begin round %d: %v", r, round, err)
	}
	w.do(r, e)
	return res
}

// step runs a dense local step on rank r that adds delta to every
// coordinate, with the exchanges given delivered while it computes.
func (w *wired) step(r int, delta float32, during ...[2]int) int {
	m := w.ms[r]
	m.read(make([]float32, len(m.params)))
	for _, l := range during {
		w.deliver(l[0], l[1])
	}
	w.updates += float64(delta) * float64(len(m.params))
	return m.apply(func(p []float32) {
		for i := range p {
			p[i] += delta
		}
	})
}

// deliver hands the oldest message on the link from → to to rank to.
func (w *wired) deliver(from, to int) {
	w.t.Helper()
	k := [2]int{from, to}
	q := w.links[k]
	if len(q) == 0 {
		w.t.Fatalf("no message from rank %d to rank %d", from, to)
	}
	w.links[k] = q[1:]
	m := w.ms[to]
	msg, err := decode(q[0], m.size, len(m.params))
	if err != nil {
		w.t.Fatalf("rank %d to rank %d: %v", from, to, err)
	}
	w.do(to, m.receive(from, &msg, start.Add(time.Second)))
}

// drain delivers every queued message, lowest link first, until none is
// left.
func (w *wired) drain() {
	for {
		var next [][2]int
		for k, q := range w.links {
			if len(q) > 0 {
				next = append(next, k)
			}
		}
		if len(next) == 0 {
			return
		}
		slices.SortFunc(next, func(a, b [2]int) int { return (a[0]-b[0])*100 + a[1] - b[1] })
		w.deliver(next[0][0], next[0][1])
	}
}

// queued is the number of messages waiting on the link from → to.
func (w *wired) queued(from, to int) int { return len(w.links[[2]int{from, to}]) }

// sum is the sum of every replica's coordinates, in float64 (exact for
// the small dyadic values these tests use).
func (w *wired) sum() float64 {
	s := 0.0
	for _, m := range w.ms {
		for _, v := range m.params {
			s += float64(v)
		}
	}
	return s
}

func outcomes(rs []Result) []Outcome {
	var out []Outcome
	for _, r := range rs {
		out = append(out, r.Outcome)
	}
	return out
}

// TestMachineMutualChoice: two ranks that pick each other average exactly
// once, whatever order their requests arrive in: the lower rank's request
// is served, the higher rank's answered BUSY, and both end with the mean,
// bit for bit, in dense and sparse mode alike.
func TestMachineMutualChoice(t *testing.T) {
	for _, c := range []struct {
		name   string
		sparse bool
		order  [][2]int // deliveries, then drain
	}{
		{"dense, rank 0's request first", false, [][2]int{{0, 1}}},
		{"dense, rank 1's request first", false, [][2]int{{1, 0}}},
		{"dense, drained", false, nil},
		{"sparse, rank 0's request first", true, [][2]int{{0, 1}}},
		{"sparse, rank 1's request first", true, [][2]int{{1, 0}}},
		{"sparse, drained", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := make([]float32, 4), make([]float32, 4)
			o := options(func(o *Options) { o.Schedule, o.Sparse, o.SparseTolerance = Rotate, c.sparse, 0 })
			w := newWired(t, [][]float32{a, b}, o)
			// Equal start, then each rank changes its own coordinates.
			must(t, w.ms[0].applySparse([]int32{0, 1, 3}, func(p []float32) { p[0], p[1], p[3] = 1, 2, 7 }))
			must(t, w.ms[1].applySparse([]int32{1, 2, 3}, func(p []float32) { p[1], p[2], p[3] = 6, -3, 0.5 }))
			w.begin(0, 0)
			w.begin(1, 0)
			for _, d := range c.order {
				w.deliver(d[0], d[1])
			}
			w.drain()
			if got := outcomes(w.settled[0]); !slices.Equal(got, []Outcome{Averaged}) {
				t.Errorf("rank 0 outcomes %v, want [averaged]", got)
			}
			if got := outcomes(w.settled[1]); !slices.Equal(got, []Outcome{Declined}) {
				t.Errorf("rank 1 outcomes %v, want [declined]", got)
			}
			want := []float32{0.5, 4, -1.5, 3.75}
			if !slices.Equal(a, want) || !slices.Equal(b, want) {
				t.Errorf("got %v and %v, want both %v", a, b, want)
			}
			if s0, s1 := w.ms[0].stats, w.ms[1].stats; s0.Served != 0 || s1.Served != 1 || s0.Refused != 1 || s1.Refused != 0 {
				t.Errorf("served %d and %d, refused %d and %d: want rank 1 to serve once and rank 0 to refuse once", s0.Served, s1.Served, s0.Refused, s1.Refused)
			}
			if c.sparse {
				for r, m := range w.ms {
					if d := m.dirty[1-r]; len(d) != 0 {
						t.Errorf("rank %d still records %v as changed for its only peer", r, d)
					}
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMachineConservesSum runs scripted interleavings of local steps,
// requests and answers on three dense machines: after each, the sum of
// the replicas is the initial sum plus the local steps' updates, exactly
// (the values are small dyadic numbers, so float32 arithmetic is exact).
func TestMachineConservesSum(t *testing.T) {
	for _, c := range []struct {
		name   string
		script func(w *wired)
		want   [][]Outcome // per rank
	}{
		{"one exchange", func(w *wired) { w.begin(0, 0); w.drain() }, [][]Outcome{{Averaged}, nil, nil}},
		{"answer lands during the initiator's next step", func(w *wired) {
			w.begin(0, 0) // rotate: rank 0 round 0 -> rank 1
			w.deliver(0, 1)
			w.step(0, 1, [2]int{1, 0}) // the reply lands mid-step: applied as a change
		}, [][]Outcome{{Averaged}, nil, nil}},
		{"initiator steps before the answer lands", func(w *wired) {
			w.begin(0, 0)
			w.step(0, 1) // Begin, local step, then the answer: applied as a change
			w.drain()
		}, [][]Outcome{{Averaged}, nil, nil}},
		{"responder mid-step", func(w *wired) {
			w.begin(0, 0)
			w.step(1, 2, [2]int{0, 1})
			w.drain()
		}, [][]Outcome{{Averaged}, nil, nil}},
		{"initiator serves a third rank while waiting", func(w *wired) {
			w.begin(0, 0) // -> rank 1
			w.begin(2, 0) // rank 2 round 0 -> rank 0
			w.deliver(2, 0)
			w.deliver(0, 1) // rank 0's request reaches rank 1 after rank 0 served rank 2
			w.drain()
		}, [][]Outcome{{Averaged}, nil, {Averaged}}},
		{"a ring of three requests", func(w *wired) {
			w.begin(0, 0) // -> 1
			w.begin(1, 0) // -> 2
			w.begin(2, 0) // -> 0
			w.step(1, -1)
			w.drain()
		}, [][]Outcome{{Averaged}, {Averaged}, {Averaged}}},
		{"mutual choice with steps on both sides", func(w *wired) {
			w.begin(0, 0) // -> 1
			w.begin(1, 1) // rank 1 round 1 -> rank 0
			w.step(0, 3, [2]int{1, 0})
			w.step(1, 1, [2]int{0, 1})
			w.drain()
		}, [][]Outcome{{Averaged}, {Declined}, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := [][]float32{{1, 2, 3, 4}, {8, -8, 16, 0}, {-4, 4, 2, 32}}
			o := options(func(o *Options) { o.Schedule = Rotate })
			w := newWired(t, params, o)
			before := w.sum()
			c.script(w)
			w.drain()
			if got, want := w.sum(), before+w.updates; got != want {
				t.Errorf("sum of the replicas %v, want %v: averaging must conserve it", got, want)
			}
			for r := range w.ms {
				if got := outcomes(w.settled[r]); !slices.Equal(got, c.want[r]) {
					t.Errorf("rank %d outcomes %v, want %v", r, got, c.want[r])
				}
				if w.ms[r].pending != nil {
					t.Errorf("rank %d: exchange %d still pending", r, w.ms[r].pending.id)
				}
			}
		})
	}
}

// TestMachineStalenessBound: a responder inside a local step serves until
// the step has absorbed MaxStaleness merges (its own exchange in flight
// counting as one), then answers BUSY; the step reports its staleness.
func TestMachineStalenessBound(t *testing.T) {
	for _, c := range []struct {
		name         string
		maxStaleness int
		ownInFlight  bool // the responder has begun its own exchange
		wantServed   int
	}{
		{"bound 1", 1, false, 1},
		{"bound 2", 2, false, 2},
		{"bound 3", 3, false, 3},
		{"bound 2, own exchange in flight", 2, true, 1},
		{"bound 1, own exchange in flight", 1, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options(func(o *Options) { o.Schedule, o.MaxStaleness = Rotate, c.maxStaleness })
			params := [][]float32{{0, 0}, {4, 8}, {2, 2}}
			w := newWired(t, params, o)
			w.ms[1].read(make([]float32, 2)) // rank 1 computes on a copy
			if c.ownInFlight {
				w.begin(1, 0) // -> rank 2, left undelivered
			}
			const tries = 4
			for round := range uint64(tries) {
				w.begin(0, 2*round) // rotate with 3 ranks: even rounds pick rank 1
				w.deliver(0, 1)
				w.deliver(1, 0)
			}
			served := 0
			for _, r := range w.settled[0] {
				if r.Outcome == Averaged {
					served++
				}
			}
			if served != c.wantServed || len(w.settled[0]) != tries {
				t.Errorf("served %d of %d requests, want %d", served, len(w.settled[0]), c.wantServed)
			}
			if st := w.ms[1].stats; st.RefusedStale != tries-c.wantServed {
				t.Errorf("refused for staleness %d times, want %d", st.RefusedStale, tries-c.wantServed)
			}
			w.drain() // rank 1's own exchange, if any, lands during the step too
			if s := w.ms[1].apply(func([]float32) {}); s > c.maxStaleness || s != c.wantServed+boolInt(c.ownInFlight) {
				t.Errorf("step staleness %d, want %d (bound %d)", s, c.wantServed+boolInt(c.ownInFlight), c.maxStaleness)
			}
		})
	}
}

// TestMachineSparseEqualsDense runs one scripted sequence of sparse local
// updates and exchanges on four dense and four sparse machines: the
// replicas must end bit for bit equal, the sparse ones having sent far
// fewer values.
func TestMachineSparseEqualsDense(t *testing.T) {
	const n, dim, steps = 4, 5000, 200
	run := func(sparse bool) ([][]float32, int64) {
		params := make([][]float32, n)
		for r := range params {
			params[r] = make([]float32, dim) // equal start, as after the broadcast
		}
		o := options(func(o *Options) { o.Seed, o.Sparse, o.SparseTolerance = 4, sparse, 0 })
		w := newWired(t, params, o)
		for step, st := range sparseScript(n, dim, steps) {
			r := st.rank
			must(t, w.ms[r].applySparse(st.touched, st.update))
			if res := w.begin(r, uint64(step)); res.Outcome != InFlight {
				t.Fatalf("step %d: %v", step, res.Outcome)
			}
			w.drain()
			if got := w.settled[r][len(w.settled[r])-1]; got.Outcome != Averaged {
				t.Fatalf("step %d: %v", step, got.Outcome)
			}
		}
		var sent int64
		for _, m := range w.ms {
			sent += m.stats.ElementsSent
		}
		return params, sent
	}
	dense, denseSent := run(false)
	sparse, sparseSent := run(true)
	sameBits(t, dense, denseSent, sparse, sparseSent)
}

// scriptStep is one local step of a sparse script: rank adds a delta to
// the coordinates touched.
type scriptStep struct {
	rank    int
	touched []int32
	update  func(p []float32)
}

// sparseScript returns steps seeded local steps of n ranks, each touching
// a few of dim coordinates.
func sparseScript(n, dim, steps int) []scriptStep {
	rng := rand.New(rand.NewPCG(5, 6))
	out := make([]scriptStep, steps)
	for i := range out {
		st := scriptStep{rank: rng.IntN(n)}
		for range 1 + rng.IntN(6) {
			st.touched = append(st.touched, int32(rng.IntN(dim)))
		}
		delta := float32(rng.NormFloat64())
		st.update = func(p []float32) {
			for _, u := range st.touched {
				p[u] += delta
			}
		}
		out[i] = st
	}
	return out
}

// sameBits fails unless the dense and sparse runs' replicas are bitwise
// equal and the sparse run sent at least 10× fewer values.
func sameBits(t *testing.T, dense [][]float32, denseSent int64, sparse [][]float32, sparseSent int64) {
	t.Helper()
	for r := range dense {
		for i := range dense[r] {
			if dense[r][i] != sparse[r][i] {
				t.Fatalf("rank %d coordinate %d: dense exchange gives %v, sparse %v", r, i, dense[r][i], sparse[r][i])
			}
		}
	}
	if sparseSent*10 > denseSent {
		t.Errorf("sparse exchange sent %d values, dense %d: want at least 10× fewer", sparseSent, denseSent)
	}
	t.Logf("values sent: dense %d, sparse %d", denseSent, sparseSent)
}

// options returns DefaultOptions changed by f.
func options(f func(o *Options)) Options {
	o := DefaultOptions()
	f(&o)
	return o
}

// TestMachineDeadPeer: a peer that failed is dropped for good: never
// picked, sent nothing, its late messages change no parameter, and an
// exchange waiting for it ends Lost with its sent coordinates dirty again.
func TestMachineDeadPeer(t *testing.T) {
	o := options(func(o *Options) { o.Schedule, o.Sparse, o.SparseTolerance = Rotate, true, 0 })
	params := [][]float32{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}
	w := newWired(t, params, o)
	must(t, w.ms[0].applySparse([]int32{2}, func(p []float32) { p[2] = 5 }))
	must(t, w.ms[2].applySparse([]int32{0}, func(p []float32) { p[0] = 9 }))
	w.begin(2, 0) // rank 2 -> rank 0, delivered after rank 2 is dropped
	w.begin(0, 1) // rank 0 round 1 -> rank 2
	sent := w.ms[0].pendingID()
	lost := errors.New("link reset")
	w.do(0, w.ms[0].lose(sent, lost))
	if got := w.settled[0]; len(got) != 1 || got[0].Outcome != Lost || got[0].Peer != 2 || !errors.Is(got[0].Err, lost) {
		t.Fatalf("rank 0 settled %+v, want the exchange with rank 2 lost", got)
	}
	if !slices.Equal(w.left[0], []int{2}) || !slices.Equal(w.ms[0].peers(), []int{1}) || !slices.Equal(w.ms[0].stats.Dead, []int{2}) {
		t.Fatalf("rank 0: left %v, peers %v, dead %v", w.left[0], w.ms[0].peers(), w.ms[0].stats.Dead)
	}
	if d := w.ms[0].dirty[2]; d[2] != 0 || len(d) != 1 {
		t.Errorf("coordinates for rank 2 %v: want coordinate 2 dirty again with its old value 0", d)
	}
	w.deliver(2, 0) // the dead peer's request: refused, and the answer not even sent
	if w.queued(0, 2) != 1 || w.ms[0].params[0] != 0 {
		t.Errorf("rank 0 answered the dead peer (%d queued) or took its value (%v)", w.queued(0, 2), w.ms[0].params)
	}
	for round := range uint64(6) {
		if res := w.begin(0, round); res.Peer != 1 {
			t.Fatalf("round %d: rank 0 picked %d", round, res.Peer)
		}
		w.deliver(0, 1)
		w.deliver(1, 0)
	}
	w.do(0, w.ms[0].requestStop(false))
	w.do(0, w.ms[0].finish())
	if w.queued(0, 2) != 1 || w.queued(0, 1) != 2 {
		t.Errorf("after stop and finish: %d messages for the dead rank (want only the request sent before), %d for rank 1 (want 2)", w.queued(0, 2), w.queued(0, 1))
	}
}

// TestMachineAbandonedAnswerIgnored: a reply that arrives after its
// exchange was given up (the caller's context ended) changes nothing.
func TestMachineAbandonedAnswerIgnored(t *testing.T) {
	o := options(func(o *Options) { o.Schedule = Rotate })
	a, b := []float32{0}, []float32{4}
	w := newWired(t, [][]float32{a, b}, o)
	w.begin(0, 0)
	w.ms[0].abandon(w.ms[0].pendingID())
	w.drain()
	if a[0] != 0 || b[0] != 2 || len(w.settled[0]) != 0 {
		t.Errorf("params %v %v, settled %v: the abandoned answer must not land", a, b, w.settled[0])
	}
	// The corrupt case: a reply of the wrong length loses the exchange.
	w.begin(0, 1)
	w.deliver(0, 1)
	w.links[[2]int{1, 0}][0] = (&message{kind: msgReply, id: w.ms[0].pendingID(), counts: make([]uint64, 2)}).encode()
	w.deliver(1, 0)
	if got := outcomes(w.settled[0]); !slices.Equal(got, []Outcome{Lost}) || !slices.Equal(w.left[0], []int{1}) || a[0] != 0 {
		t.Errorf("a malformed reply: outcomes %v, left %v, params %v: want lost, rank 1 dropped, nothing applied", got, w.left[0], a)
	}
}

// TestMachineStopAndCountsTravel: the stop flag, its asker and the step
// counts ride on every message; each rank keeps the largest count and the
// lowest asker it heard.
func TestMachineStopAndCountsTravel(t *testing.T) {
	o := options(func(o *Options) { o.Schedule = Rotate })
	w := newWired(t, [][]float32{{0}, {1}, {2}}, o)
	w.ms[0].counts[0] = 5
	w.ms[2].counts[2] = 7
	w.ms[0].stop = true // set, not announced: it must travel on the reply
	w.begin(1, 1)       // rank 1 round 1 -> rank 0
	w.drain()
	if total, stop := w.ms[1].progress(); !stop || total != 5 {
		t.Errorf("rank 1 progress %d, stop %v: want 5 and true from rank 0's reply", total, stop)
	}
	w.begin(1, 0) // -> rank 2
	w.drain()
	if total, stop := w.ms[2].progress(); total != 12 || !stop {
		t.Errorf("rank 2 heard %d steps, stop %v: want 12 (its own 7 and rank 0's 5 via rank 1) and true", total, stop)
	}
	if w.ms[2].asker != -1 {
		t.Errorf("rank 2 heard rank %d asked to stop, want none (-1): rank 0's stop was not asked from outside", w.ms[2].asker)
	}
	w.do(2, w.ms[2].requestStop(true))
	if w.queued(2, 0) != 1 || w.queued(2, 1) != 1 {
		t.Errorf("stop request queued %d and %d times for ranks 0 and 1, want once each", w.queued(2, 0), w.queued(2, 1))
	}
	w.drain()
	for r, m := range w.ms {
		if m.asker != 2 {
			t.Errorf("rank %d heard rank %d asked to stop, want 2 (its SIGTERM)", r, m.asker)
		}
	}
	w.do(1, w.ms[1].requestStop(true)) // a second asker: everyone keeps the lowest
	w.drain()
	for r, m := range w.ms {
		if m.asker != 1 {
			t.Errorf("after rank 1 asked too, rank %d names rank %d, want 1 (the lowest)", r, m.asker)
		}
	}
}

// TestMachineFinish: finished ranks swap final parameters, refuse
// exchanges, and leave each other's peer sets.
func TestMachineFinish(t *testing.T) {
	o := options(func(o *Options) { o.Schedule = Rotate })
	params := [][]float32{{0, 1}, {2, 3}, {4, 5}}
	w := newWired(t, params, o)
	w.begin(2, 0) // rank 2 -> rank 0, arriving after rank 0 finished
	for r := range 2 {
		w.do(r, w.ms[r].finish())
	}
	w.drain()
	if got := outcomes(w.settled[2]); !slices.Equal(got, []Outcome{Declined}) {
		t.Errorf("exchange with a finished rank: %v, want declined", got)
	}
	if _, _, err := w.ms[0].begin(1); err == nil {
		t.Error("exchange after finish accepted")
	}
	for r := range 2 {
		f := w.ms[r].finalParams()
		if !slices.Equal(f[0], params[0]) || !slices.Equal(f[1], params[1]) || f[2] != nil {
			t.Errorf("rank %d finals %v: want ranks 0 and 1 only", r, f)
		}
		if !slices.Equal(w.left[r], []int{1 - r}) {
			t.Errorf("rank %d: peers that left %v, want [%d]", r, w.left[r], 1-r)
		}
	}
	if !slices.Equal(w.ms[2].peers(), []int(nil)) || !slices.Equal(w.ms[2].stats.Finished, []int{0, 1}) {
		t.Errorf("rank 2: peers %v, finished %v", w.ms[2].peers(), w.ms[2].stats.Finished)
	}
}
