package timeline

import (
	"bytes"
	"context"
	"encoding/json"
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
