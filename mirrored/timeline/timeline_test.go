package timeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
)

func TestRecorderKeepsTheLastSteps(t *testing.T) {
	r := NewRecorder(2) // the last 2 steps, 16 spans at most
	t0 := time.Unix(100, 0)
	for i := range 40 {
		r.Add(Compute, "", i, t0.Add(time.Duration(i)*time.Millisecond), t0.Add(time.Duration(i)*time.Millisecond+500*time.Microsecond))
	}
	got := r.Spans()
	if len(got) != 2 || got[0].Step != 38 || got[1].Step != 39 {
		t.Fatalf("kept %d spans, steps %d..%d; want steps 38 and 39", len(got), got[0].Step, got[len(got)-1].Step)
	}
	// Many spans a step: the buffer bounds them (8 a step) and the last
	// steps are whole.
	r = NewRecorder(2)
	for i := range 10 {
		for range 5 {
			r.Add(Compute, "", i, t0, t0)
		}
	}
	if got := r.Spans(); len(got) != 10 || got[0].Step != 8 {
		t.Fatalf("kept %d spans from step %d; want 10 from step 8", len(got), got[0].Step)
	}
	var nilRec *Recorder
	nilRec.Add(Compute, "", 1, t0, t0) // a nil recorder records nothing
	if nilRec.Spans() != nil {
		t.Fatal("a nil recorder returned spans")
	}
}

// TestWriteIsATrace checks the output against the Trace Event Format's
// rules: a traceEvents array, every event with a name, a known phase, a
// pid and tid; timestamps in microseconds, complete events with a
// non-negative duration, metadata naming every process and thread; all
// peers on rank 0's clock, and the last arrival at each combine marked.
func TestWriteIsATrace(t *testing.T) {
	base := time.Unix(1000, 0)
	ms := func(x float64) time.Time { return base.Add(time.Duration(x * float64(time.Millisecond))) }
	// Rank 1's clock runs 5 s ahead; on rank 0's clock it reaches each
	// combine 2 ms after rank 0.
	const skew = 5 * time.Second
	r0, r1 := NewRecorder(10), NewRecorder(10)
	for step := 1; step <= 3; step++ {
		at := float64(10 * step)
		r0.Add(Compute, "", step, ms(at-4), ms(at))
		r0.Add(Combine, "", step, ms(at), ms(at+3))
		r1.Add(Compute, "", step, ms(at-4).Add(skew), ms(at+2).Add(skew))
		r1.Add(Combine, "", step, ms(at+2).Add(skew), ms(at+3).Add(skew))
	}
	r0.Add(Evaluate, "epoch 1", 0, ms(40), ms(45))
	var buf bytes.Buffer
	if err := Write(&buf, []Peer{{Rank: 0, Spans: r0.Spans()}, {Rank: 1, Offset: int64(skew), Spans: r1.Spans()}}); err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &trace); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	named := map[[2]int]bool{}
	procs := map[int]bool{}
	var marks []map[string]any
	for i, e := range trace.TraceEvents {
		name, _ := e["name"].(string)
		ph, _ := e["ph"].(string)
		pid, okp := e["pid"].(float64)
		tid, okt := e["tid"].(float64)
		if name == "" || !okp || !okt {
			t.Fatalf("event %d lacks name, pid or tid: %v", i, e)
		}
		switch ph {
		case "M":
			if name == "process_name" {
				procs[int(pid)] = true
			}
			if name == "thread_name" {
				named[[2]int{int(pid), int(tid)}] = true
			}
		case "X":
			ts, ok1 := e["ts"].(float64)
			dur, ok2 := e["dur"].(float64)
			if !ok1 || !ok2 || dur < 0 || ts < 0 {
				t.Fatalf("complete event %d: ts %v dur %v", i, e["ts"], e["dur"])
			}
			if !named[[2]int{int(pid), int(tid)}] || !procs[int(pid)] {
				t.Fatalf("event %d on an unnamed process or thread: %v", i, e)
			}
			// On rank 0's clock every step's spans of both ranks lie
			// within 10 ms of each other.
			if int(pid) == 1 && ts > 50_000 {
				t.Fatalf("rank 1's span at %v µs: its clock offset was not applied", ts)
			}
		case "i":
			marks = append(marks, e)
		case "B", "E":
			t.Fatalf("unpaired begin/end events are not written: %v", e)
		default:
			t.Fatalf("event %d: unknown phase %q", i, ph)
		}
	}
	if len(marks) != 3 {
		t.Fatalf("%d last-arrival marks, want one per combine (3)", len(marks))
	}
	for _, m := range marks {
		args := m["args"].(map[string]any)
		if m["name"] != "last to combine: rank 1" || m["pid"].(float64) != 1 || math.Abs(args["after_first_us"].(float64)-2000) > 1 {
			t.Fatalf("mark %v: want rank 1, 2000 µs after rank 0", m)
		}
	}
}

// TestMeasureOffset finds a rank's clock skew over the in-memory network.
func TestMeasureOffset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 3
	skews := []time.Duration{0, 3 * time.Second, -2 * time.Second}
	net := collective.NewMemNetwork(n)
	got := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r], errs[r] = measureOffset(ctx, c, 5, func() time.Time { return time.Now().Add(skews[r]) })
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if d := got[r] - skews[r]; d < -20*time.Millisecond || d > 20*time.Millisecond {
			t.Errorf("rank %d: offset %v, want %v", r, got[r], skews[r])
		}
	}
}

// TestPhasesNestInTheirSpan: the collective's phases recorded during a
// step are taken by the combine or bucket span that contains them, onto
// its track and step, in order; a phase outside any (an evaluation's
// all-reduce) is dropped when the next step starts; a step keeps at most
// maxPhases.
func TestPhasesNestInTheirSpan(t *testing.T) {
	t0 := time.Unix(100, 0)
	ms := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Millisecond))) }
	phase := func(name string, from, to float64) collective.Phase {
		return collective.Phase{Name: name, Start: ms(from), End: ms(to)}
	}
	r := NewRecorder(10)
	r.Phase(phase("ring reduce-scatter", 0.5, 0.8)) // before step 1: an earlier collective's
	// Step 1: a bucket all-reduced during the backward pass (2-4 ms),
	// the rest after it, in the combine (6-9 ms).
	for _, p := range []collective.Phase{phase(collective.PhaseReduceScatter, 2, 3), phase(collective.PhaseAllGather, 3, 4),
		phase(collective.PhaseReduceScatter, 6.5, 8), phase(collective.PhaseAllGather, 8, 8.5)} {
		r.Phase(p)
	}
	r.Add(Input, "", 1, ms(1), ms(1.5))
	r.Add(Compute, "gradient", 1, ms(1.5), ms(6))
	r.Add(Combine, "", 1, ms(6), ms(9))
	r.Add(Update, "", 1, ms(9), ms(10))
	r.Add(Buckets, "all-reduce of gradient [10,20) during the backward pass", 1, ms(2), ms(4))
	type nested struct {
		track, name string
		step        int
	}
	var got []nested
	for _, s := range r.Spans() {
		got = append(got, nested{s.Track, s.Name, s.Step})
	}
	want := []nested{{Input, "", 1}, {Compute, "gradient", 1}, {Combine, "", 1},
		{Combine, collective.PhaseReduceScatter, 1}, {Combine, collective.PhaseAllGather, 1},
		{Update, "", 1}, {Buckets, "all-reduce of gradient [10,20) during the backward pass", 1},
		{Buckets, collective.PhaseReduceScatter, 1}, {Buckets, collective.PhaseAllGather, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spans\n%v\nwant\n%v", got, want)
	}
	if len(r.pending) != 0 {
		t.Fatalf("%d phases left pending, want the one before the step dropped", len(r.pending))
	}
	// Step 2: more phases than a step keeps.
	for i := range maxPhases + 3 {
		r.Phase(phase(fmt.Sprintf("tree: round %d", i), 21+float64(i)/10, 21.05+float64(i)/10))
	}
	r.Add(Input, "", 2, ms(20), ms(20.5))
	r.Add(Combine, "", 2, ms(21), ms(23))
	n := 0
	for _, s := range r.Spans() {
		if s.Step == 2 && s.Name != "" {
			n++
		}
	}
	if n != maxPhases {
		t.Errorf("step 2 kept %d phases, want %d", n, maxPhases)
	}
	var nilRec *Recorder
	nilRec.Phase(phase("x", 1, 2)) // records nothing
}

// BenchmarkStep is what recording one synchronous step costs: its five
// spans.
func BenchmarkStep(b *testing.B) {
	r := NewRecorder(DefaultSteps)
	t0 := time.Now()
	for i := range b.N {
		r.Add(Input, "", i, t0, t0)
		r.Add(Compute, "gradient", i, t0, t0)
		r.Add(Wait, "barrier", i, t0, t0)
		r.Add(Combine, "", i, t0, t0)
		r.Add(Update, "", i, t0, t0)
	}
}

// BenchmarkStepWithPhases is BenchmarkStep with a ring all-reduce's two
// phases taken by the combine: what --timeline costs a step now.
func BenchmarkStepWithPhases(b *testing.B) {
	r := NewRecorder(DefaultSteps)
	t0 := time.Now()
	rs := collective.Phase{Name: collective.PhaseReduceScatter, Start: t0, End: t0}
	ag := collective.Phase{Name: collective.PhaseAllGather, Start: t0, End: t0}
	for i := range b.N {
		r.Phase(rs)
		r.Phase(ag)
		r.Add(Input, "", i, t0, t0)
		r.Add(Compute, "gradient", i, t0, t0)
		r.Add(Wait, "barrier", i, t0, t0)
		r.Add(Combine, "", i, t0, t0)
		r.Add(Update, "", i, t0, t0)
	}
}
