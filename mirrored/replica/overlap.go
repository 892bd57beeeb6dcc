package replica

import (
	"context"
	"time"

	"github.com/meshtrain/meshtrain/nn"
)

// DefaultGradientBucket is mirrored's Config.GradientBucket default: 1 MiB, DDP's
// first bucket. A model's last layers are usually its largest (the CNN's
// dense layer holds 98% of its gradient), so the first bucket carries most
// of the exchange while the convolutions' backward pass runs; LeNet-5's
// whole gradient (241 KiB) stays below it and is exchanged at once.
const DefaultGradientBucket = 1 << 20

// RangeReducer is a Group that can all-reduce part of a buffer with the
// arithmetic of the whole (collective.Comm.AllReduceFloat32Range), so that
// a step can exchange its last layers' gradient while the first layers'
// is computed and still end with the bits of one all-reduce. NewGroup's
// Group is one; a wrapped Group is not, and its steps exchange the whole
// gradient after the backward pass.
type RangeReducer interface {
	AllReduceSumRange(ctx context.Context, buf []float32, lo, hi int) error
}

// Overlapper is a replica that can start its exchange during Gradient.
// StartOverlap arms the next Gradient to hand its buckets to g as they
// become final, and returns false when it cannot (the model does not
// announce its gradient, or g cannot reduce part of a buffer); Combine
// then finishes the exchange; AbortOverlap waits for what was started when
// the step ends before Combine.
type Overlapper interface {
	StartOverlap(ctx context.Context, g Group) bool
	AbortOverlap()
	// Buckets are the last step's all-reduces, for the timeline.
	Buckets() []BucketSpan
}

var _ Overlapper = (*Dense)(nil)

// BucketSpan is one bucket's all-reduce: gradient elements [Lo, Hi), and
// when it ran; Early says it was started during the backward pass.
type BucketSpan struct {
	Lo, Hi     int
	Start, End time.Time
	Early      bool
}

// MergeBuckets returns a step's buckets as at most two spans, those sent
// during the backward pass and those after it, each from its first
// start to its last end over the elements they cover: the timeline keeps
// a bounded number of spans a step, whatever the number of buckets.
func MergeBuckets(bs []BucketSpan) []BucketSpan {
	var out []BucketSpan
	for _, b := range bs {
		if n := len(out); n > 0 && out[n-1].Early == b.Early {
			m := &out[n-1]
			m.Lo, m.Hi = min(m.Lo, b.Lo), max(m.Hi, b.Hi)
			m.End = b.End
			continue
		}
		out = append(out, b)
	}
	return out
}

// overlap is a dense replica's exchange of one step's gradient in buckets,
// planned once from the model's GradPoints: a bucket ends at the first
// point at least bucket elements below the last, and goes to the exchange
// goroutine when the backward pass announces that point; Combine sends
// what was not announced and the rest. The buckets are all-reduced in
// order, one at a time, so every replica makes the same collective calls,
// a replica with an empty batch (no backward pass) included.
type overlap struct {
	grads  []float32
	plan   []int           // the buckets' lower ends, decreasing
	next   int             // plan[next] is the next bucket to send
	issued int             // grads[issued:] went to the exchange
	work   chan BucketSpan // lo, hi, early: the times are the goroutine's to set
	done   chan error
	cancel context.CancelFunc // the exchange's context
	spans  []BucketSpan       // the exchange goroutine's, read after done
}

// newOverlap returns the bucketed exchange of model's gradient, or nil if
// the model does not announce its gradient, bucketBytes turns it off, or
// the gradient makes one bucket.
func newOverlap(model nn.Model, bucketBytes int) *overlap {
	gn, ok := model.(nn.GradNotifier)
	if !ok || bucketBytes < 0 {
		return nil
	}
	if bucketBytes == 0 {
		bucketBytes = DefaultGradientBucket
	}
	ov := &overlap{grads: model.Grads()}
	bucket, hi := max(1, bucketBytes/4), len(ov.grads)
	for _, lo := range gn.GradPoints() {
		if lo > 0 && lo < hi && hi-lo >= bucket {
			ov.plan = append(ov.plan, lo)
			hi = lo
		}
	}
	if len(ov.plan) == 0 {
		return nil
	}
	gn.NotifyGrads(ov.ready)
	return ov
}

// start arms the next backward pass: its buckets go to comb over g.
func (ov *overlap) start(ctx context.Context, g Group, comb Combiner) {
	ov.issued, ov.next = len(ov.grads), 0
	ctx, ov.cancel = context.WithCancel(ctx)
	// Every bucket and the rest: the backward pass never waits for room.
	ov.work, ov.done = make(chan BucketSpan, len(ov.plan)+1), make(chan error, 1)
	work, done, grads := ov.work, ov.done, ov.grads
	spans := ov.spans[:0]
	go func() {
		var err error
		for sp := range work {
			if err == nil {
				sp.Start = time.Now()
				err = comb.CombineRange(ctx, g, grads, sp.Lo, sp.Hi)
				sp.End = time.Now()
				spans = append(spans, sp)
			}
		}
		ov.spans = spans
		done <- err
	}()
}

// ready is the model's notification that grads[lo:] is final: the buckets
// planned down to lo go.
func (ov *overlap) ready(lo int) {
	if ov.work == nil {
		return
	}
	for ov.next < len(ov.plan) && ov.plan[ov.next] >= lo {
		ov.send(ov.plan[ov.next], true)
	}
}

func (ov *overlap) send(lo int, early bool) {
	ov.work <- BucketSpan{Lo: lo, Hi: ov.issued, Early: early}
	ov.issued = lo
	if lo > 0 {
		ov.next++
	}
}

// finish sends the buckets not yet sent and the rest, and waits for all.
func (ov *overlap) finish() error {
	for ov.next < len(ov.plan) {
		ov.send(ov.plan[ov.next], false)
	}
	ov.send(0, false)
	return ov.wait()
}

// wait waits for the buckets sent so far; the step is over.
func (ov *overlap) wait() error {
	if ov.work == nil {
		return nil
	}
	close(ov.work)
	err := <-ov.done
	ov.cancel()
	ov.work, ov.done = nil, nil
	return err
}

func (r *Dense) StartOverlap(ctx context.Context, g Group) bool {
	if _, ok := g.(RangeReducer); r.ov == nil || !ok || g.Size() < 2 {
		return false
	}
	r.ov.start(ctx, g, r.combiner())
	return true
}

func (r *Dense) Buckets() []BucketSpan {
	if r.ov == nil {
		return nil
	}
	return r.ov.spans
}

func (r *Dense) AbortOverlap() {
	if r.ov != nil && r.ov.work != nil {
		// The step failed here: a bucket in flight would wait for peers
		// that may never join it (they failed too, or wait for a step
		// this replica will not take) until the collective's timeout.
		// Cancelling breaks the communicator, which ends the run (or
		// the elastic generation) as the step's failure does anyway.
		r.ov.cancel()
		_ = r.ov.wait() // the step's own error is the one to report
	}
}
