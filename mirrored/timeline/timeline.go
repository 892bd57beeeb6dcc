package timeline

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
)

// Tracks a peer's spans go on, in the order they are shown.
const (
	Input      = "input"
	Compute    = "compute"
	Wait       = "wait"
	Combine    = "combine"
	Update     = "update"
	Evaluate   = "evaluate"
	Checkpoint = "checkpoint"
	Gossip     = "gossip"
	// Buckets holds each all-reduce of a part of the gradient (see
	// mirrored's Config.GradientBucket), those that ran during the
	// backward pass too, where Combine holds only what the step waited
	// for after it.
	Buckets = "buckets"
)

var tracks = []string{Input, Compute, Wait, Combine, Update, Evaluate, Checkpoint, Gossip, Buckets}

// DefaultSteps is how many steps a Recorder keeps by default.
const DefaultSteps = 2000

// spansPerStep is the room a step has in a Recorder's buffer (input,
// compute, wait, combine, update, two gradient buckets, an epoch's
// evaluation and checkpoint, and maxPhases of the collective's phases):
// the buffer's hard bound; Spans returns the last Steps steps of it.
const spansPerStep = 10 + maxPhases

// maxPhases is how many of the collective's phases a step keeps: a ring
// all-reduce has two, recursive doubling one per round (four to six up to
// 16 ranks); a gradient all-reduced in many buckets has two per bucket,
// of which the first maxPhases are kept. maxPending bounds the phases
// waiting for the span that takes them (those of collectives outside a
// step's combine, such as an evaluation's, are dropped at the next step).
const (
	maxPhases  = 8
	maxPending = 64
)

// Span is one piece of a peer's work: on Track, from Start for Dur
// nanoseconds (Start in Unix nanoseconds of the peer's own clock), during
// global step Step (0: outside the steps).
type Span struct {
	Track string `json:"t"`
	Name  string `json:"n,omitempty"`
	Step  int    `json:"s"`
	Start int64  `json:"b"`
	Dur   int64  `json:"d"`
}

// Recorder keeps one peer's last spans. The zero value is not usable;
// a nil *Recorder records nothing.
type Recorder struct {
	mu    sync.Mutex
	buf   []Span
	next  int  // where the next span goes
	full  bool // buf has wrapped
	steps int
	last  int // the highest step recorded
	// pending are the collective's phases not yet taken by a span;
	// phaseStep the step whose phases were taken last, phases how many.
	pending           []collective.Phase
	phaseStep, phases int
}

// NewRecorder keeps the spans of about the last steps steps (≤ 0:
// DefaultSteps).
func NewRecorder(steps int) *Recorder {
	if steps <= 0 {
		steps = DefaultSteps
	}
	return &Recorder{buf: make([]Span, steps*spansPerStep), steps: steps}
}

// Steps is how many steps r keeps.
func (r *Recorder) Steps() int { return r.steps }

// Add records a span of track from start to end at step. A combine or
// gradient-bucket span takes the collective's phases recorded within it
// (Phase) onto its track and step, where a trace viewer nests them.
func (r *Recorder) Add(track, name string, step int, start, end time.Time) {
	if r == nil {
		return
	}
	s := Span{Track: track, Name: name, Step: step, Start: start.UnixNano(), Dur: end.Sub(start).Nanoseconds()}
	r.mu.Lock()
	r.put(s)
	switch track {
	case Input: // a step's first span: older phases belong to no step
		r.pending = slices.DeleteFunc(r.pending, func(p collective.Phase) bool { return p.End.Before(start) })
	case Combine, Buckets:
		r.claim(s, start, end)
	}
	r.mu.Unlock()
}

func (r *Recorder) put(s Span) {
	r.last = max(r.last, s.Step)
	r.buf[r.next] = s
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// Phase records a phase of an all-reduce (collective.Options.Phases), to
// be taken by the combine or bucket span that contains it when the
// training loop adds that span, at the step's end. It reads no clock:
// the collective took the times.
func (r *Recorder) Phase(p collective.Phase) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if len(r.pending) == maxPending {
		r.pending = append(r.pending[:0], r.pending[1:]...)
	}
	r.pending = append(r.pending, p)
	r.mu.Unlock()
}

// claim moves the pending phases within span (from start to end) onto
// its track and step, up to maxPhases a step. Times are compared, and a
// phase placed, on the monotonic clock that spans' durations are
// measured on, so that it nests in its span to the nanosecond (the wall
// clock's Unix times may drift from it by tens of nanoseconds a
// millisecond).
func (r *Recorder) claim(span Span, start, end time.Time) {
	kept := r.pending[:0]
	for _, p := range r.pending {
		if p.Start.Before(start) || p.End.After(end) {
			kept = append(kept, p)
			continue
		}
		if r.phaseStep != span.Step {
			r.phaseStep, r.phases = span.Step, 0
		}
		if r.phases < maxPhases {
			r.put(Span{Track: span.Track, Name: p.Name, Step: span.Step, Start: span.Start + p.Start.Sub(start).Nanoseconds(), Dur: p.End.Sub(p.Start).Nanoseconds()})
			r.phases++
		}
	}
	r.pending = kept
}

// Spans returns the spans of the last Steps steps, oldest first.
func (r *Recorder) Spans() []Span {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	all := slices.Clone(r.buf[:r.next])
	if r.full {
		all = append(slices.Clone(r.buf[r.next:]), all...)
	}
	return slices.DeleteFunc(all, func(s Span) bool { return s.Step <= r.last-r.steps })
}

// Peer is one peer's record as the chief merges it.
type Peer struct {
	Rank int `json:"rank"`
	// Offset is the peer's clock minus rank 0's, in nanoseconds.
	Offset int64  `json:"offset_ns"`
	Spans  []Span `json:"spans"`
}

// offsetTag marks MeasureOffset's messages.
const offsetTag uint32 = 0x74696d65 // "time"

// MeasureOffset returns this rank's clock minus rank 0's, as NTP
// estimates it: rank 0 sends each other rank rounds probes in turn, the
// rank answers each with its clock, and rank 0 takes the answer of the
// round trip that was shortest (the least queueing) as the clock at its
// midpoint; then it tells each rank its offset. Every rank calls it at the
// same point (it uses point-to-point messages); rank 0 gets 0.
func MeasureOffset(ctx context.Context, c *collective.Comm, rounds int) (time.Duration, error) {
	return measureOffset(ctx, c, rounds, time.Now)
}

// measureOffset is MeasureOffset on the clock now.
func measureOffset(ctx context.Context, c *collective.Comm, rounds int, now func() time.Time) (time.Duration, error) {
	if rounds < 1 {
		rounds = 1
	}
	if c.Rank() != 0 {
		for range rounds {
			if _, err := c.Recv(ctx, 0, offsetTag); err != nil {
				return 0, fmt.Errorf("timeline: clock probe from rank 0: %w", err)
			}
			if err := c.Send(ctx, 0, offsetTag, binary.LittleEndian.AppendUint64(nil, uint64(now().UnixNano()))); err != nil {
				return 0, fmt.Errorf("timeline: answering rank 0's clock probe: %w", err)
			}
		}
		b, err := c.Recv(ctx, 0, offsetTag)
		if err != nil || len(b) != 8 {
			return 0, fmt.Errorf("timeline: this rank's clock offset from rank 0: %v (%d bytes)", err, len(b))
		}
		return time.Duration(int64(binary.LittleEndian.Uint64(b))), nil
	}
	for peer := 1; peer < c.Size(); peer++ {
		best, offset := time.Duration(-1), int64(0)
		for range rounds {
			t0 := now()
			if err := c.Send(ctx, peer, offsetTag, []byte{1}); err != nil {
				return 0, fmt.Errorf("timeline: clock probe to rank %d: %w", peer, err)
			}
			b, err := c.Recv(ctx, peer, offsetTag)
			t2 := now()
			if err != nil || len(b) != 8 {
				return 0, fmt.Errorf("timeline: rank %d's clock: %v (%d bytes)", peer, err, len(b))
			}
			if rtt := t2.Sub(t0); best < 0 || rtt < best {
				mid := t0.UnixNano() + rtt.Nanoseconds()/2
				best, offset = rtt, int64(binary.LittleEndian.Uint64(b))-mid
			}
		}
		if err := c.Send(ctx, peer, offsetTag, binary.LittleEndian.AppendUint64(nil, uint64(offset))); err != nil {
			return 0, fmt.Errorf("timeline: telling rank %d its clock offset: %w", peer, err)
		}
	}
	return 0, nil
}

// event is one Trace Event Format record.
type event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"` // microseconds
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// Write writes the peers' spans as one trace (JSON object form), on rank
// 0's clock, with the time origin at the earliest span. At each step with
// a combine on two or more peers, an instant event on the combine track
// of the peer that arrived last names it, and how long after the first.
func Write(w io.Writer, peers []Peer) error {
	var origin int64 = -1
	for _, p := range peers {
		for _, s := range p.Spans {
			if t := s.Start - p.Offset; origin < 0 || t < origin {
				origin = t
			}
		}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	evs := []event{}
	type arrival struct {
		rank int
		at   int64
	}
	// A peer arrives at a step's combine when it starts waiting for the
	// others (a sampled barrier) or starts the combine itself.
	arrivals := map[int][]arrival{}
	arrive := func(step, rank int, at int64) {
		for i, a := range arrivals[step] {
			if a.rank == rank {
				arrivals[step][i].at = min(a.at, at)
				return
			}
		}
		arrivals[step] = append(arrivals[step], arrival{rank, at})
	}
	for _, p := range peers {
		evs = append(evs, event{Name: "process_name", Ph: "M", Pid: p.Rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", p.Rank)}},
			event{Name: "process_sort_index", Ph: "M", Pid: p.Rank, Args: map[string]any{"sort_index": p.Rank}})
		for i, t := range tracks {
			evs = append(evs, event{Name: "thread_name", Ph: "M", Pid: p.Rank, Tid: i, Args: map[string]any{"name": t}},
				event{Name: "thread_sort_index", Ph: "M", Pid: p.Rank, Tid: i, Args: map[string]any{"sort_index": i}})
		}
		for _, s := range p.Spans {
			tid := slices.Index(tracks, s.Track)
			if tid < 0 {
				return fmt.Errorf("timeline: rank %d: unknown track %q", p.Rank, s.Track)
			}
			start := s.Start - p.Offset - origin
			d := us(s.Dur)
			name := s.Name
			if name == "" {
				name = s.Track
			}
			evs = append(evs, event{Name: name, Cat: s.Track, Ph: "X", Ts: us(start), Dur: &d, Pid: p.Rank, Tid: tid, Args: map[string]any{"step": s.Step}})
			if (s.Track == Combine || s.Track == Wait) && s.Step > 0 {
				arrive(s.Step, p.Rank, start)
			}
		}
	}
	steps := make([]int, 0, len(arrivals))
	for st := range arrivals {
		steps = append(steps, st)
	}
	sort.Ints(steps)
	tid := slices.Index(tracks, Combine)
	for _, st := range steps {
		a := arrivals[st]
		if len(a) < 2 {
			continue
		}
		first, last := a[0], a[0]
		for _, x := range a[1:] {
			if x.at < first.at {
				first = x
			}
			if x.at > last.at {
				last = x
			}
		}
		evs = append(evs, event{Name: fmt.Sprintf("last to combine: rank %d", last.rank), Cat: "arrival", Ph: "i", S: "t", Ts: us(last.at),
			Pid: last.rank, Tid: tid, Args: map[string]any{"step": st, "after_first_us": us(last.at - first.at)}})
	}
	enc := json.NewEncoder(w)
	return enc.Encode(struct {
		TraceEvents     []event `json:"traceEvents"`
		DisplayTimeUnit string  `json:"displayTimeUnit"`
	}{evs, "ms"})
}

// WriteFile writes the trace to path (atomically: a reader never sees half
// of it).
func WriteFile(path string, peers []Peer) error {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	if err := Write(f, peers); err != nil {
		f.Abort()
		return err
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}
