package mirrored

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
	"github.com/meshtrain/meshtrain/nn"
)

// rangeCounter is a Group that counts the part-buffer all-reduces it
// passes on, so a test can tell the overlapped exchange ran.
type rangeCounter struct {
	Group
	n *atomic.Int64
}

func (c rangeCounter) AllReduceSumRange(ctx context.Context, buf []float32, lo, hi int) error {
	c.n.Add(1)
	return c.Group.(replica.RangeReducer).AllReduceSumRange(ctx, buf, lo, hi)
}

// smallCNN is a Job.NewModel: conv → relu → conv → relu → pool → dense →
// dense, whose layers cut its 60,000-odd gradient into several buckets of
// a few KiB.
func smallCNN(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
	return nn.NewSequential("small-cnn", nn.Shape{H: spec.Rows, W: spec.Cols, C: 1}, seed, shards,
		nn.Conv2D{Filters: 4, Kernel: 3}, nn.Activation{Fn: "relu"},
		nn.Conv2D{Filters: 8, Kernel: 3}, nn.Activation{Fn: "relu"},
		nn.MaxPooling2D{Size: 2}, nn.Dropout{Rate: 0.25}, nn.Flatten{},
		nn.Dense{Units: 32}, nn.Activation{Fn: "relu"},
		nn.Dense{Units: spec.Classes})
}

// TestOverlapSameBits trains the same job with the gradient exchanged
// after the backward pass and in buckets during it (several sizes, with
// MeasureWait's sampled steps, which never overlap, among them): every
// run ends with the same parameters, bit for bit, and the bucketed runs
// did exchange parts during the pass.
func TestOverlapSameBits(t *testing.T) {
	mn := synthMNIST(361, 60, 3) // shards of 121, 120, 120: ranks 1 and 2 end each epoch with an empty batch
	var want string
	for _, tc := range []struct {
		name   string
		bucket int
		ranges bool // part-buffer all-reduces expected
	}{
		{"off", -1, false},
		{"default (one bucket holds it all)", 0, false},
		{"4 KiB buckets", 4 << 10, true},
		{"a bucket per layer", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob(t, "", mn, 8, 2)
			job.NewModel = smallCNN
			job.GradientBucket = tc.bucket
			job.Timeline = timeline.NewRecorder(0) // shared by the replicas: it locks
			var n atomic.Int64
			sums, errs := runGroupOn(t, same(3, job), nil, func(_ int, g Group) Group { return rangeCounter{g, &n} })
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if got := n.Load() > 0; got != tc.ranges {
				t.Fatalf("%d part-buffer all-reduces, want some: %v", n.Load(), tc.ranges)
			}
			early := 0
			for _, sp := range job.Timeline.Spans() {
				if sp.Track == timeline.Buckets && strings.Contains(sp.Name, "during the backward pass") {
					early++
				}
			}
			if got := early > 0; got != tc.ranges {
				t.Fatalf("%d bucket spans during the backward pass on the timeline, want some: %v", early, tc.ranges)
			}
			for r, s := range sums {
				if s.Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
					t.Fatalf("rank %d ends with %s, rank 0 with %s", r, s.Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
				}
			}
			if want == "" {
				want = sums[0].Run.ParamsSHA256
			} else if sums[0].Run.ParamsSHA256 != want {
				t.Fatalf("parameters %s, without overlap %s", sums[0].Run.ParamsSHA256, want)
			}
		})
	}
}

// TestOverlapBucketMismatchNamed: replicas given different buckets would
// cut their collectives differently; they are told at start-up.
func TestOverlapBucketMismatchNamed(t *testing.T) {
	job := testJob(t, "", synthMNIST(120, 30, 4), 8, 1)
	job.NewModel = smallCNN
	jobs := same(2, job)
	jobs[1].GradientBucket = 4 << 10
	_, errs := runGroup(t, jobs)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "gradient_bucket") {
			t.Fatalf("rank %d: %v, want the gradient_bucket setting named", r, err)
		}
	}
}

// TestOverlapEmptyBatch: a replica with no examples in a step (a padded
// epoch's end) makes no backward pass, yet cuts its exchange into the same
// buckets as the others, so the step neither fails nor hangs and ends as
// without buckets.
func TestOverlapEmptyBatch(t *testing.T) {
	mn := synthMNIST(64, 8, 6)
	ds := mn.Train.Dataset()
	run := func(bucket int) [][]float32 {
		cfg := DefaultConfig()
		cfg.Optimizer, cfg.GradientBucket = nn.Momentum, bucket
		return stepCluster(t, 2, 6, 4, ds, func(r int, g Group) replica.Replica {
			rep, err := newDenseReplica(&cfg, smallCNN, mn.Test, mn.NumClasses(), r, 2, mn)
			if err != nil {
				t.Fatal(err)
			}
			if bucket > 0 && !rep.Overlaps() {
				t.Fatal("no buckets planned")
			}
			if r == 1 {
				return emptyOnOddSteps{rep, new(int)}
			}
			return rep
		})
	}
	on, off := run(4<<10), run(-1)
	if ParamsHash(on[0]) != ParamsHash(on[1]) || ParamsHash(on[0]) != ParamsHash(off[0]) {
		t.Fatal("replicas differ, or differ from the run without buckets")
	}
}

// emptyOnOddSteps gives its replica an empty batch on odd steps: those
// that overlap in stepCluster (its even steps measure waiting).
type emptyOnOddSteps struct {
	*replica.Dense
	step *int
}

func (e emptyOnOddSteps) Gradient(b *data.Batch) (float64, error) {
	odd := *e.step%2 == 1
	*e.step++
	if odd {
		b = &data.Batch{Dim: b.Dim}
	}
	return e.Dense.Gradient(b)
}

// TestSplitExchange: the barrier's wait on sampled steps is time, carried
// to the other steps as time, never beyond their exchange phase.
func TestSplitExchange(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name                      string
		phase                     time.Duration
		unsampled                 int
		sampledWait, sampledPhase time.Duration
		sampled                   int
		wantComm, wantWait        time.Duration
	}{
		{"no samples: all communication", 150 * ms, 15, 0, 0, 0, 150 * ms, 0},
		{"even peers", 15 * 10 * ms, 15, 1 * ms, 10 * ms, 1, 144 * ms, 16 * ms},
		{"a straggler, exchange after the pass", 15 * 60 * ms, 15, 50 * ms, 60 * ms, 1, 160 * ms, 800 * ms},
		// Buckets: the unsampled steps' phase is the wait and what was
		// left of the exchange; the sampled step's is all of it.
		{"a straggler, exchange during the pass", 15 * 55 * ms, 15, 50 * ms, 60 * ms, 1, 85 * ms, 800 * ms},
		{"wait capped by the phase", 15 * 2 * ms, 15, 50 * ms, 60 * ms, 1, 10 * ms, 80 * ms},
	} {
		comm, wait := splitExchange(tc.phase, tc.unsampled, tc.sampledWait, tc.sampledPhase, tc.sampled)
		if comm != tc.wantComm || wait != tc.wantWait {
			t.Errorf("%s: comm %v wait %v, want %v and %v", tc.name, comm, wait, tc.wantComm, tc.wantWait)
		}
	}
}

// TestOverlapFailedStepDoesNotWait: a replica whose step fails after its
// first bucket went out (a non-finite loss) while its peer failed before
// sending any (a bad label) stops at once, not after the collective's
// timeout.
func TestOverlapFailedStepDoesNotWait(t *testing.T) {
	mn := synthMNIST(16, 8, 7)
	ds := mn.Train.Dataset()
	net := collective.NewMemNetwork(2)
	cfg := DefaultConfig()
	cfg.GradientBucket = 4 << 10
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := time.Now()
	for r := range 2 {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := newDenseReplica(&cfg, smallCNN, mn.Test, mn.NumClasses(), r, 2, mn)
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(ds, 0, 4)
		if r == 0 {
			for i := range b.X {
				b.X[i] = float32(math.Inf(1))
			}
		} else {
			b.Labels[0] = 99
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = syncStep(context.Background(), rep, NewGroup(c), b, 0, 0.05, false, nil, nil)
		}()
	}
	wg.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the failed steps took %v: they waited for the collective's timeout", took)
	}
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: no error", r)
		}
	}
}

// TestOverlapElasticLoss: of 3 elastic replicas exchanging in buckets,
// peer 1 dies after its 7th step, so the others' next step finds it gone
// with a bucket in flight during the backward pass; they form a new
// generation and finish with the parameters of the same run without
// buckets.
func TestOverlapElasticLoss(t *testing.T) {
	mn := synthMNIST(480, 60, 8)
	hashes := map[int]string{}
	for _, bucket := range []int{4 << 10, -1} {
		jobs := make([]Job, 3)
		for i := range jobs {
			jobs[i] = testJob(t, "", mn, 16, 2)
			jobs[i].NewModel, jobs[i].GradientBucket = smallCNN, bucket
			jobs[i].MeasureWait = false // every step overlaps
			jobs[i].Faults.KillRank, jobs[i].Faults.KillAfter = 1, 7
		}
		sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3})
		if !errors.Is(errs[1], ErrInjectedKill) {
			t.Fatalf("bucket %d: peer 1: %v, want the injected kill", bucket, errs[1])
		}
		for _, i := range []int{0, 2} {
			if errs[i] != nil {
				t.Fatalf("bucket %d: peer %d: %v", bucket, i, errs[i])
			}
		}
		if sums[0].Run.ParamsSHA256 != sums[2].Run.ParamsSHA256 || len(sums[0].Run.Membership) != 1 {
			t.Fatalf("bucket %d: survivors %s and %s, record %+v", bucket, sums[0].Run.ParamsSHA256, sums[2].Run.ParamsSHA256, sums[0].Run.Membership)
		}
		hashes[bucket] = sums[0].Run.ParamsSHA256
	}
	if hashes[4<<10] != hashes[-1] {
		t.Fatalf("with buckets %s, without %s", hashes[4<<10], hashes[-1])
	}
}
