package mirrored

import (
	"context"
	"fmt"
	"time"

	"github.com/meshtrain/meshtrain/nn"
)

// DefaultGradientBucket is Job.GradientBucket's default: 1 MiB, DDP's
// first bucket. A model's last layers are usually its largest (the CNN's
// dense layer holds 98% of its gradient), so the first bucket carries most
// of the exchange while the convolutions' backward pass runs; LeNet-5's
// whole gradient (241 KiB) stays below it and is exchanged at once.
const DefaultGradientBucket = 1 << 20

// rangeReducer is a Group that can all-reduce part of a buffer with the
// arithmetic of the whole (collective.Comm.AllReduceFloat32Range), so that
// a step can exchange its last layers' gradient while the first layers'
// is computed and still end with the bits of one all-reduce. NewGroup's
// Group is one; a wrapped Group is not, and its steps exchange the whole
// gradient after the backward pass.
type rangeReducer interface {
	AllReduceSumRange(ctx context.Context, buf []float32, lo, hi int) error
}

// overlapper is a replica that can start its exchange during Gradient.
// startOverlap arms the next Gradient to hand its buckets to g as they
// become final, and returns false when it cannot (the model does not
// announce its gradient, or g cannot reduce part of a buffer); Combine
// then finishes the exchange; abortOverlap waits for what was started when
// the step ends before Combine.
type overlapper interface {
	startOverlap(ctx context.Context, g Group) bool
	abortOverlap()
	// buckets are the last step's all-reduces, for the timeline.
	buckets() []bucketSpan
}

// bucketSpan is one bucket's all-reduce: gradient elements [lo, hi), and
// when it ran; early says it was started during the backward pass.
type bucketSpan struct {
	lo, hi     int
	start, end time.Time
	early      bool
}

// overlap is a dense replica's exchange of one step's gradient in buckets:
// a bucket goes to the exchange goroutine once at least bucket elements
// past the last one are final, and Combine sends the rest. The buckets are
// all-reduced in order, one at a time, so every replica makes the same
// collective calls (the model's layers cut the buckets identically).
type overlap struct {
	grads  []float32
	bucket int // elements
	most   int // buckets a step can send: a layer's tensors at least one each
	issued int // grads[issued:] went to the exchange
	work   chan [2]int
	done   chan error
	spans  []bucketSpan // the exchange goroutine's, read after done
}

// newOverlap returns the bucketed exchange of model's gradient, or nil if
// the model does not announce its gradient or bucketBytes turns it off.
func newOverlap(model nn.Model, bucketBytes int) *overlap {
	gn, ok := model.(nn.GradNotifier)
	if !ok || bucketBytes < 0 {
		return nil
	}
	if bucketBytes == 0 {
		bucketBytes = DefaultGradientBucket
	}
	ov := &overlap{grads: model.Grads(), bucket: max(1, bucketBytes/4), most: len(model.Tensors()) + 1}
	if len(ov.grads) <= ov.bucket {
		return nil // one bucket: nothing to overlap
	}
	gn.NotifyGrads(ov.ready)
	return ov
}

// start arms the next backward pass: its buckets go to g.
func (ov *overlap) start(ctx context.Context, g rangeReducer) {
	ov.issued = len(ov.grads)
	// One bucket per layer at most, and the rest: the backward pass never
	// waits for room.
	ov.work, ov.done = make(chan [2]int, ov.most), make(chan error, 1)
	work, done, grads := ov.work, ov.done, ov.grads
	spans := ov.spans[:0]
	go func() {
		var err error
		for r := range work {
			if err == nil {
				sp := bucketSpan{lo: r[0], hi: r[1], start: time.Now(), early: r[0] > 0}
				if err = g.AllReduceSumRange(ctx, grads, r[0], r[1]); err != nil {
					err = fmt.Errorf("all-reducing the gradients [%d,%d) of %d during the backward pass: %w", r[0], r[1], len(grads), err)
				}
				sp.end = time.Now()
				spans = append(spans, sp)
			}
		}
		ov.spans = spans
		done <- err
	}()
}

// ready is the model's notification that grads[lo:] is final.
func (ov *overlap) ready(lo int) {
	if ov.work == nil || ov.issued-lo < ov.bucket {
		return
	}
	ov.work <- [2]int{lo, ov.issued}
	ov.issued = lo
}

// finish sends the rest of the gradient and waits for every bucket.
func (ov *overlap) finish() error {
	if ov.issued > 0 {
		ov.work <- [2]int{0, ov.issued}
		ov.issued = 0
	}
	return ov.wait()
}

// wait waits for the buckets sent so far; the step is over.
func (ov *overlap) wait() error {
	if ov.work == nil {
		return nil
	}
	close(ov.work)
	err := <-ov.done
	ov.work, ov.done = nil, nil
	return err
}

func (r *denseReplica) startOverlap(ctx context.Context, g Group) bool {
	rr, ok := g.(rangeReducer)
	if r.ov == nil || !ok || g.Size() < 2 {
		return false
	}
	r.ov.start(ctx, rr)
	return true
}

func (r *denseReplica) buckets() []bucketSpan {
	if r.ov == nil {
		return nil
	}
	return r.ov.spans
}

func (r *denseReplica) abortOverlap() {
	if r.ov != nil {
		_ = r.ov.wait() // the step's own error is the one to report
	}
}
