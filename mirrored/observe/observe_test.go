package observe

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/mirrored"
)

// TestStepSampler: a Sampled hook gets the steps summed up every `every`
// steps and at the last one (with the mean loss of those steps), and a
// StepProgress fed those sums writes the lines a replica's own would.
func TestStepSampler(t *testing.T) {
	var got []mirrored.Event
	s := &stepSampler{onEvent: func(e mirrored.Event) { got = append(got, e) }, every: 10, last: time.Now().Add(time.Hour)}
	var direct, relayed bytes.Buffer
	own := NewStepProgress(&direct, false, 10, 1, "")
	for step := 1; step <= 25; step++ {
		e := mirrored.Event{Kind: mirrored.EventStep, Step: step, Steps: 25, Train: &mirrored.StepStats{Loss: float64(step), Examples: 4}}
		own.Step(e)
		if err := s.Observe(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Observe(mirrored.Event{Kind: mirrored.EventEpoch}); err != nil {
		t.Fatal(err)
	}
	want := []struct{ step, steps, examples int }{{10, 10, 40}, {20, 10, 40}, {25, 5, 20}}
	if len(got) != len(want)+1 || got[len(got)-1].Kind != mirrored.EventEpoch {
		t.Fatalf("got %d events, want %d steps and the epoch: %+v", len(got), len(want), got)
	}
	far := NewStepProgress(&relayed, false, 10, 1, "")
	for i, w := range want {
		e := got[i]
		if e.Step != w.step || e.Train.Steps != w.steps || e.Train.Examples != w.examples {
			t.Errorf("event %d: step %d covering %d steps, %d examples; want %+v", i, e.Step, e.Train.Steps, e.Train.Examples, w)
		}
		if mean := float64(2*w.step-w.steps+1) / 2; e.Train.Loss != mean {
			t.Errorf("event %d: loss %v, want the mean %v", i, e.Train.Loss, mean)
		}
		far.Step(e)
	}
	loss := func(b *bytes.Buffer) (out []string) {
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			out = append(out, strings.Join(strings.Fields(l)[:4], " ")) // step and loss: rate and times differ
		}
		return out
	}
	if a, b := loss(&direct), loss(&relayed); strings.Join(a, "|") != strings.Join(b, "|") || len(a) != 2 {
		t.Errorf("relayed progress lines %q, want the replica's own %q", b, a)
	}
}

func TestMergeSamples(t *testing.T) {
	a := mirrored.ResourceSample{Seconds: 1, Interval: 1, Step: 10, CPUUser: 1, RSSBytes: 100, Sent: 10, Links: []mirrored.LinkRate{{Peer: 1, Sent: 10}}}
	b := mirrored.ResourceSample{Seconds: 4, Interval: 3, Step: 40, CPUUser: 2, RSSBytes: 200, Sent: 30, Links: []mirrored.LinkRate{{Peer: 1, Sent: 30}}}
	m := mergeSamples(a, b)
	if m.Seconds != 4 || m.Interval != 4 || m.Step != 40 || m.CPUUser != 1.75 || m.RSSBytes != 200 || m.Sent != 25 || m.Links[0].Sent != 25 {
		t.Fatalf("merged %+v", m)
	}
}

// TestSamplerBounded: a full history halves instead of growing.
func TestSamplerBounded(t *testing.T) {
	s := &sampler{}
	for i := range MaxResourceSamples + 10 {
		s.add(mirrored.ResourceSample{Seconds: float64(i + 1), Interval: 1, CPUUser: 1})
	}
	if n := len(s.samples); n >= MaxResourceSamples || n < MaxResourceSamples/2 {
		t.Fatalf("%d samples kept, want between %d and %d", n, MaxResourceSamples/2, MaxResourceSamples)
	}
	if last := s.samples[len(s.samples)-1]; last.Seconds != float64(MaxResourceSamples+10) {
		t.Fatalf("the newest sample is at %v s", last.Seconds)
	}
}

// TestProgressRateSurvivesBursts: step events that reach the progress in
// a burst (a launcher reading a worker's relayed lines late) show the rate
// of the steps' own time, not of the microseconds between their arrival;
// events without their time fall back to the clock.
func TestProgressRateSurvivesBursts(t *testing.T) {
	var out bytes.Buffer
	p := NewStepProgress(&out, false, 10, 2, "")
	for step := 1; step <= 10; step++ { // 10 steps of 64 examples, 20 ms each: 3,200 examples/s, ×2 replicas
		p.Step(mirrored.Event{Kind: mirrored.EventStep, Step: step, Steps: 20, Train: &mirrored.StepStats{Loss: 1, Examples: 64, Seconds: 0.020}})
	}
	if !strings.Contains(out.String(), "  6400 examples/s") {
		t.Errorf("a burst of timed steps: %q, want 6400 examples/s", out.String())
	}
	out.Reset()
	time.Sleep(20 * time.Millisecond)
	for step := 11; step <= 20; step++ { // untimed: the clock's ~20 ms for 1,280 examples
		p.Step(mirrored.Event{Kind: mirrored.EventStep, Step: step, Steps: 20, Train: &mirrored.StepStats{Loss: 1, Examples: 64}})
	}
	if strings.Contains(out.String(), " 6400 examples/s") || !strings.Contains(out.String(), "examples/s") {
		t.Errorf("untimed steps: %q, want the clock's rate", out.String())
	}
}
