package mirrored

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/internal/synth"
	"github.com/meshtrain/meshtrain/nn"
)

// synthMNIST is a learnable stand-in for MNIST: class c lights up a
// class-specific band of pixels, plus noise.
func synthMNIST(ntrain, ntest int, seed uint64) *data.MNIST {
	return synth.MNIST(ntrain, ntest, rand.New(rand.NewPCG(seed, 7)))
}

func testJob(t *testing.T, model string, mn *data.MNIST, batch, epochs int) Job {
	cfg := DefaultConfig()
	cfg.Model, cfg.BatchSize, cfg.Epochs, cfg.MNIST = model, batch, epochs, mn
	cfg.LR = 0.02
	cfg.Logger = zaptest.NewLogger(t)
	return Job{Config: cfg, HashEvery: 4, MeasureWait: true}
}

// runGroup runs jobs[r] as rank r of an in-memory cluster and returns every
// rank's summary and error.
func runGroup(t *testing.T, jobs []Job) ([]*Summary, []error) {
	t.Helper()
	return runGroupOn(t, jobs, nil, nil)
}

// runGroupOn is runGroup with hooks: wire, if set, sees the network and
// the jobs (copies) before the runs start, to wire fault hooks; wrap, if
// set, wraps each replica's Group. The replicas must be done within two
// minutes.
func runGroupOn(t *testing.T, jobs []Job, wire func(net *collective.MemNetwork, jobs []Job), wrap func(r int, g Group) Group) ([]*Summary, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := len(jobs)
	net := collective.NewMemNetwork(n)
	jobs = slices.Clone(jobs)
	if wire != nil {
		wire(net, jobs)
	}
	sums, errs := make([]*Summary, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(collective.CountTraffic(net.Transport(r)), collective.Options{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var g Group = NewGroup(c)
		if wrap != nil {
			g = wrap(r, g)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r], errs[r] = Run(ctx, jobs[r], g)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%d replicas did not finish within two minutes: %v", n, errors.Join(errs...))
	}
	return sums, errs
}

func same(n int, j Job) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i] = j
	}
	return out
}

// TestReplicasMatchOneBigBatch is the test that matters: N replicas on
// sharded data end with the same parameters as one replica on the whole
// global batch (to rounding, since the sums run in another order), and the
// N replicas agree bit for bit.
func TestReplicasMatchOneBigBatch(t *testing.T) {
	mn := synthMNIST(600, 100, 1)
	for _, tc := range []struct {
		model    string
		replicas int
		batch    int
		tol      float64
	}{
		{nn.Softmax, 2, 16, 1e-6},
		{nn.Softmax, 3, 8, 1e-6},
		{nn.LeNet5, 2, 8, 1e-5},
	} {
		t.Run(fmt.Sprintf("%s/N=%d", tc.model, tc.replicas), func(t *testing.T) {
			job := testJob(t, tc.model, mn, tc.batch, 2)
			job.NoShuffle = true
			if tc.model == nn.LeNet5 {
				job.TrainExamples = 160
			}
			sums, errs := runGroup(t, same(tc.replicas, job))
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r, s := range sums {
				if s.Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
					t.Errorf("rank %d params %s, rank 0 %s: replicas not bitwise identical", r, s.Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
				}
				if s.Peer.BytesSent == 0 || s.Peer.BytesReceived == 0 {
					t.Errorf("rank %d counted no traffic: %+v", r, s.Peer)
				}
			}

			one := job
			one.BatchSize = tc.batch * tc.replicas
			oneSums, oneErrs := runGroup(t, []Job{one})
			if oneErrs[0] != nil {
				t.Fatal(oneErrs[0])
			}
			if sums[0].Run.Steps != oneSums[0].Run.Steps || sums[0].Run.Steps == 0 {
				t.Fatalf("%d steps with %d replicas, %d with one", sums[0].Run.Steps, tc.replicas, oneSums[0].Run.Steps)
			}
			// Compare the parameters themselves: rerun both to get them.
			multi, single := finalParams(t, same(tc.replicas, job)), finalParams(t, []Job{one})
			var worst float64
			for i := range single {
				d := math.Abs(float64(multi[i]-single[i])) / math.Max(1, math.Abs(float64(single[i])))
				worst = max(worst, d)
			}
			t.Logf("%d steps; largest relative difference from one replica: %g", oneSums[0].Run.Steps, worst)
			if worst > tc.tol {
				t.Errorf("largest relative difference from one replica on the whole batch: %g (tolerance %g)", worst, tc.tol)
			}
			if worst == 0 && tc.replicas > 1 {
				t.Logf("bitwise equal to one replica (the sums happened to round alike)")
			}
			if d := math.Abs(sums[0].Run.FinalAccuracy - oneSums[0].Run.FinalAccuracy); d > 0.02 {
				t.Errorf("accuracy %v with %d replicas, %v with one", sums[0].Run.FinalAccuracy, tc.replicas, oneSums[0].Run.FinalAccuracy)
			}
		})
	}
}

// finalParams runs jobs and returns rank 0's final parameters, read back
// from the checkpoint the chief writes at the end.
func finalParams(t *testing.T, jobs []Job) []float32 {
	t.Helper()
	_, ck := runCheckpointed(t, jobs)
	return ck.Params
}

func TestReplicasLearn(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(1200, 300, 2), 16, 2)
	sums, errs := runGroup(t, same(3, job))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := sums[0]
	if s.Run.FinalAccuracy < 0.9 {
		t.Errorf("test accuracy %.3f after 2 epochs on a separable synthetic set, want ≥ 0.9", s.Run.FinalAccuracy)
	}
	if len(s.Run.EpochResults) != 2 || s.Run.Steps != 2*data.Steps(1200, 3, 16, true) {
		t.Errorf("ran %d epochs, %d steps", len(s.Run.EpochResults), s.Run.Steps)
	}
	for _, sum := range sums {
		p := sum.Peer
		if p.Steps != s.Run.Steps || p.Examples != p.Steps*16 || p.TestAccuracy != s.Run.FinalAccuracy {
			t.Errorf("rank %d: %+v", p.Rank, p)
		}
		if shares := p.ComputeShare + p.CommShare + p.WaitShare; math.Abs(shares-1) > 1e-9 || p.ComputeShare <= 0 || p.CommShare <= 0 {
			t.Errorf("rank %d time shares %v/%v/%v", p.Rank, p.ComputeShare, p.CommShare, p.WaitShare)
		}
	}
}

func TestSettingsMismatch(t *testing.T) {
	mn := synthMNIST(300, 50, 4)
	job := testJob(t, nn.Softmax, mn, 16, 1)
	jobs := same(3, job)
	jobs[1].BatchSize = 32
	jobs[2].Model = nn.LeNet5
	_, errs := runGroup(t, jobs)
	for r, err := range errs {
		want := []string{
			"the peers were started with different settings",
			"model is softmax on ranks 0, 1 but lenet on rank 2",
			"params is 7850 on ranks 0, 1 but 61706 on rank 2",
			"batch_size is 16 on ranks 0, 2 but 32 on rank 1",
			"start every peer with the same training flags",
		}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("rank %d: %v\nwant it to contain %q", r, err, w)
			}
		}
	}
	// The driver's settings: a cluster list and an all-reduce algorithm
	// that differ (found, before, only at the first all-reduce, by rank 0).
	jobs = same(3, job)
	jobs[0].Cluster, jobs[1].Cluster, jobs[2].Cluster = "3 peers 0a1b2c3d", "3 peers 0a1b2c3d", "3 peers 99999999"
	jobs[0].AllReduceAlgo, jobs[1].AllReduceAlgo, jobs[2].AllReduceAlgo = "ring", "tree", "ring"
	_, errs = runGroup(t, jobs)
	for r, err := range errs {
		for _, w := range []string{"cluster is 3 peers 0a1b2c3d on ranks 0, 1 but 3 peers 99999999 on rank 2", "allreduce_algo is ring on ranks 0, 2 but tree on rank 1"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("rank %d: %v\nwant it to contain %q", r, err, w)
			}
		}
	}
	// Different data on one rank is caught too.
	jobs = same(2, job)
	jobs[1].MNIST = synthMNIST(300, 50, 5)
	_, errs = runGroup(t, jobs)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "data is ") {
			t.Errorf("rank %d with different data: %v", r, err)
		}
	}
}

// TestResume checks that a run resumed from a mid-epoch checkpoint ends
// bit for bit where the uninterrupted run ends, and that a run resumes by
// itself from the newest checkpoint in its directory.
func TestResume(t *testing.T) {
	t.Run("softmax-adam", func(t *testing.T) {
		job := testJob(t, nn.Softmax, synthMNIST(400, 80, 6), 16, 3) // 12 steps per epoch on 2 replicas
		job.Optimizer = nn.Adam
		job.LR = 0.01
		testResume(t, job, 2*7850+1)
	})
	t.Run("lenet-momentum", func(t *testing.T) {
		testResume(t, testJob(t, nn.LeNet5, synthMNIST(400, 80, 6), 16, 3), 61706)
	})
}

// checkpointedRun runs job on 2 replicas with a checkpoint every 5 steps
// into a fresh directory, and returns the job that did it and its result.
func checkpointedRun(t *testing.T, job Job) (Job, *Result) {
	t.Helper()
	job.CheckpointEvery = 5
	job.CheckpointDir = t.TempDir()
	sums, errs := runGroup(t, same(2, job))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return job, sums[0].Run
}

// copyCheckpoint copies the checkpoint of step from directory from into
// directory to, through hurt if it is not nil, and returns the copy's
// path.
func copyCheckpoint(t *testing.T, from, to string, step int, hurt func([]byte)) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(from, checkpoint.FileName(step)))
	if err != nil {
		t.Fatal(err)
	}
	if hurt != nil {
		hurt(b)
	}
	path := filepath.Join(to, checkpoint.FileName(step))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func testResume(t *testing.T, job Job, optState int) {
	job.CheckpointEvery = 5
	full, want := checkpointedRun(t, job)
	all, _ := checkpoint.List(full.CheckpointDir)
	if len(all) != 8 { // every 5 steps (5, 10, ..., 35), and at the end (36)
		t.Errorf("checkpoints: %q, want steps 5, 10, ..., 35 and 36", all)
	}
	mid := filepath.Join(full.CheckpointDir, checkpoint.FileName(15)) // epoch 2, step 3
	ck, err := checkpoint.Read(mid)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Epoch != 2 || ck.StepInEpoch != 3 || ck.StepsPerEpoch != 12 || len(ck.OptState) != optState {
		t.Fatalf("checkpoint at step 15: epoch %d step %d of %d, %d optimizer values", ck.Epoch, ck.StepInEpoch, ck.StepsPerEpoch, len(ck.OptState))
	}

	resumed := job
	resumed.Restore = mid
	resumed.CheckpointDir = t.TempDir()
	sums, errs := runGroup(t, same(2, resumed))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := sums[0].Run
	if got.ParamsSHA256 != want.ParamsSHA256 || got.Steps != want.Steps || got.FinalAccuracy != want.FinalAccuracy {
		t.Errorf("resumed run: %s after %d steps, accuracy %v; uninterrupted: %s after %d steps, accuracy %v",
			got.ParamsSHA256, got.Steps, got.FinalAccuracy, want.ParamsSHA256, want.Steps, want.FinalAccuracy)
	}
	if len(got.EpochResults) != 3 || got.EpochResults[0] != want.EpochResults[0] {
		t.Errorf("per-epoch history not carried over: %+v", got.EpochResults)
	}
	if sums[1].Peer.ResumedStep != 15 || sums[1].Peer.Steps != want.Steps-15 {
		t.Errorf("rank 1: resumed at %d, ran %d steps", sums[1].Peer.ResumedStep, sums[1].Peer.Steps)
	}

	// Automatic resume: a directory whose newest checkpoint is step 25.
	auto := job
	auto.CheckpointDir = t.TempDir()
	for _, step := range []int{10, 25} {
		copyCheckpoint(t, full.CheckpointDir, auto.CheckpointDir, step, nil)
	}
	sums, errs = runGroup(t, same(2, auto))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if sums[0].Run.ParamsSHA256 != want.ParamsSHA256 || sums[0].Peer.ResumedStep != 25 {
		t.Errorf("auto-resume from step %d ended at %s, want %s", sums[0].Peer.ResumedStep, sums[0].Run.ParamsSHA256, want.ParamsSHA256)
	}

	// Resuming a finished run does no more steps and reports the same.
	sums, errs = runGroup(t, same(2, full))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if sums[0].Run.ParamsSHA256 != want.ParamsSHA256 || sums[0].Peer.Steps != 0 || len(sums[0].Run.EpochResults) != 3 {
		t.Errorf("rerun of a finished run: %d steps, %s", sums[0].Peer.Steps, sums[0].Run.ParamsSHA256)
	}
}

func TestResumeRefusesOtherConfigs(t *testing.T) {
	mn := synthMNIST(300, 50, 7)
	job := testJob(t, nn.Softmax, mn, 16, 1)
	job.CheckpointDir = t.TempDir()
	if _, errs := runGroup(t, same(2, job)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	other := job
	other.LR = 0.5
	_, errs := runGroup(t, same(2, other))
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "was written by another configuration: lr is 0.02 on the checkpoint but 0.5 on this run") {
			t.Errorf("rank %d: %v", r, err)
		}
		if r > 0 && (err == nil || !strings.Contains(err.Error(), "rank 0 (the chief) could not start: checkpoint ")) {
			t.Errorf("rank %d does not say the chief failed: %v", r, err)
		}
	}
	// A corrupt newest checkpoint is passed over, and named
	// (TestResumeFallsBackFromDamaged checks the fallback itself).
	bad := filepath.Join(job.CheckpointDir, checkpoint.FileName(999))
	if err := os.WriteFile(bad, []byte("\x10\x00\x00\x00\x00\x00\x00\x00{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var info string
	job.Observers = []Observer{ObserverFunc(func(e Event) error {
		if e.Kind == EventResumed && e.Rank == 0 {
			info = e.Info
		}
		return nil
	})}
	sums, errs := runGroup(t, same(2, job))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if sums[0].Peer.ResumedFrom == bad || !strings.Contains(info, bad+": damaged") {
		t.Errorf("resumed from %q (step %d), warning %q; want the intact checkpoint and a warning naming %s", sums[0].Peer.ResumedFrom, sums[0].Peer.ResumedStep, info, bad)
	}
}

func TestParamHashDivergence(t *testing.T) {
	net := collective.NewMemNetwork(3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for r := range 3 {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		params := []float32{1, 2, 3}
		if r == 2 {
			params[1] = math.Nextafter32(2, 3)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = compareParamHashes(context.Background(), NewGroup(c), paramsSum(params), "step 7")
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "replicas diverged at step 7: ranks 0, 1 have sha256 ") || !strings.Contains(err.Error(), ", rank 2 has sha256 ") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestJobPeerFailure(t *testing.T) {
	mn := synthMNIST(3000, 50, 8)
	job := testJob(t, nn.Softmax, mn, 8, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := collective.NewMemNetwork(3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		j := job
		if r == 1 {
			j.Observers = []Observer{ObserverFunc(func(e Event) error {
				if e.Kind == "epoch" {
					net.Kill(1) // dies after its first epoch
				}
				return nil
			})}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = Run(ctx, j, NewGroup(c))
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the replicas hung after a peer died")
	}
	for _, r := range []int{0, 2} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "rank 1") {
			t.Errorf("rank %d: %v, want an error naming rank 1", r, errs[r])
		}
	}
}

// BenchmarkJobStep measures the mirrored step (compute, all-reduce,
// update) of 2 in-process replicas on the in-memory transport: the
// strategy's overhead without a network. Fixed seed, synthetic data.
func BenchmarkJobStep(b *testing.B) {
	for _, model := range []string{nn.Softmax, nn.LeNet5} {
		b.Run(model, func(b *testing.B) {
			mn := synthMNIST(4096, 64, 11)
			cfg := DefaultConfig()
			cfg.Model, cfg.BatchSize, cfg.Epochs, cfg.MNIST, cfg.TestExamples = model, 64, 1, mn, 64
			job := Job{Config: cfg, MeasureWait: true}
			steps := 0
			b.ResetTimer()
			for range b.N {
				net := collective.NewMemNetwork(2)
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for r := range 2 {
					c, err := collective.New(net.Transport(r), collective.Options{Timeout: time.Minute})
					if err != nil {
						b.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						var s *Summary
						if s, errs[r] = Run(context.Background(), job, NewGroup(c)); r == 0 && s != nil {
							steps += s.Peer.Steps
						}
					}()
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(steps*2*64)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

// TestExtendFinishedRun: a finished run extended with more epochs (the
// same flags and --epochs larger, as Keras's initial_epoch, Horovod and
// torch users extend runs) resumes from its last checkpoint and ends bit
// for bit where an uninterrupted run of that many epochs ends, on a
// schedule that does not depend on the total (the recipe's step decay
// after a warm-up); a cosine schedule, which does, is refused with the
// reason, and so is a checkpoint past the run's last epoch.
func TestExtendFinishedRun(t *testing.T) {
	mn := synthMNIST(300, 50, 11)
	job := testJob(t, nn.Softmax, mn, 16, 2)
	job.LRDecayEpochs, job.WarmupEpochs = 0.5, 0.3
	want, errs := runGroup(t, same(2, job)) // uninterrupted, 2 epochs
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	short := job
	short.Epochs, short.CheckpointDir = 1, t.TempDir()
	if _, errs := runGroup(t, same(2, short)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	long := short
	long.Epochs = 2
	got, errs := runGroup(t, same(2, long))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r := range got {
		if got[r].Run.ParamsSHA256 != want[r].Run.ParamsSHA256 || got[r].Peer.ResumedStep == 0 || len(got[r].Run.EpochResults) != 2 {
			t.Errorf("rank %d: extended to 2 epochs from step %d: params %.12s, %d epochs; want %.12s as uninterrupted",
				r, got[r].Peer.ResumedStep, got[r].Run.ParamsSHA256, len(got[r].Run.EpochResults), want[r].Run.ParamsSHA256)
		}
	}

	// Past the run's last epoch: the 2-epoch checkpoint, resumed at 1.
	_, errs = runGroup(t, same(2, short))
	if err := errs[0]; err == nil || !strings.Contains(err.Error(), "past this run's 1 epochs: give --epochs 2 or more") {
		t.Errorf("a 2-epoch checkpoint resumed with 1 epoch: %v", err)
	}

	cos := job
	cos.Schedule, cos.Epochs, cos.CheckpointDir = nn.ScheduleCosine, 1, t.TempDir()
	if _, errs := runGroup(t, same(2, cos)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	cos.Epochs = 2
	_, errs = runGroup(t, same(2, cos))
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "the cosine schedule decays over the run's total steps, so a run of 2 epochs would have had another learning rate at every step and cannot continue this one") {
			t.Errorf("rank %d: a cosine run extended: %v, want it refused with the reason", r, err)
		}
	}
}
