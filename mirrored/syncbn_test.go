package mirrored

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn/keras"
	"github.com/meshtrain/meshtrain/sparse"
)

// kerasJob is a job training the Keras file name (nn/keras/testdata) on
// set, batch examples per replica, one epoch in data-set order.
func kerasJob(t *testing.T, name string, set *data.ImageSet, batch int) Job {
	t.Helper()
	m, err := keras.ReadFile(filepath.Join("..", "nn", "keras", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	job := testJob(t, "", set, batch, 1)
	job.NewModel, job.HashEvery, job.NoShuffle = m.NewModel, 1, true
	return job
}

// runCheckpointed runs jobs, each writing checkpoints to its own
// folder, and returns their summaries and rank 0's last checkpoint.
func runCheckpointed(t *testing.T, jobs []Job) ([]*Summary, *checkpoint.Checkpoint) {
	t.Helper()
	dir := t.TempDir()
	for i := range jobs {
		jobs[i].CheckpointDir = dir
	}
	sums, errs := runGroup(t, jobs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	path, err := checkpoint.Latest(dir)
	if err != nil || path == "" {
		t.Fatalf("no final checkpoint: %v", err)
	}
	ck, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return sums, ck
}

// TestSyncBatchNormOnTwoPeers: ResNet-20 from its Keras file on two
// replicas with synchronized batch normalization (over the in-memory
// transport) ends with the same parameters and moving statistics, bit
// for bit, on both, which no broadcast of the buffers now enforces; it
// ends where one replica on the whole global batch ends (normalising
// the same batch) to rounding, and unsynchronized replicas end
// elsewhere. The checkpoint records the setting; the default's does not.
func TestSyncBatchNormOnTwoPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("ResNet-20, four runs: seconds of CPU")
	}
	const batch = 8
	set := synthColour(32, 16, 3)
	job := kerasJob(t, "resnet20_keras3.json", set, batch)
	job.SyncBatchNorm = true
	sums, ck := runCheckpointed(t, same(2, job))
	a, b := sums[0].Run, sums[1].Run
	if a.ParamsSHA256 == "" || a.ParamsSHA256 != b.ParamsSHA256 || a.BuffersSHA256 == "" || a.BuffersSHA256 != b.BuffersSHA256 {
		t.Fatalf("rank 1 ends with params %s buffers %s, rank 0 with %s and %s", b.ParamsSHA256, b.BuffersSHA256, a.ParamsSHA256, a.BuffersSHA256)
	}
	if a.Steps != 2 {
		t.Errorf("%d steps, want 2", a.Steps)
	}
	if !strings.Contains(ck.Config, `"sync_batchnorm"`) {
		t.Errorf("the checkpoint's settings %s do not record sync_batchnorm", ck.Config)
	}

	one := job
	one.BatchSize = 2 * batch
	_, whole := runCheckpointed(t, []Job{one})
	plain := job
	plain.SyncBatchNorm = false
	_, apart := runCheckpointed(t, same(2, plain))
	if strings.Contains(apart.Config, "sync_batchnorm") {
		t.Errorf("a default run's checkpoint records sync_batchnorm: %s", apart.Config)
	}
	worst := func(p []float32) float64 {
		w := 0.0
		for i, v := range whole.Params {
			w = max(w, math.Abs(float64(p[i]-v))/math.Max(1, math.Abs(float64(v))))
		}
		return w
	}
	synced, unsynced := worst(ck.Params), worst(apart.Params)
	t.Logf("largest relative difference from one replica on the whole batch: synchronized %.3g, not %.3g", synced, unsynced)
	if synced > 1e-4 {
		t.Errorf("synchronized: %.3g from one replica on the whole batch, want ≤ 1e-4", synced)
	}
	if unsynced < 10*synced || unsynced < 1e-4 {
		t.Errorf("unsynchronized: %.3g from one replica on the whole batch, synchronized %.3g: the test cannot tell them apart", unsynced, synced)
	}
}

// TestSyncBatchNormMismatchNamed: a replica started without
// --sync-batchnorm beside one with it is refused at start-up, naming the
// setting and who holds which value.
func TestSyncBatchNormMismatchNamed(t *testing.T) {
	job := kerasJob(t, "batchnorm_tfkeras2.json", synthMNIST(64, 16, 5), 8)
	jobs := same(2, job)
	jobs[1].SyncBatchNorm = true
	_, errs := runGroup(t, jobs)
	const want = "sync_batchnorm is false on rank 0 but true on rank 1"
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v, want %q", r, err, want)
		}
	}
}

// TestSyncBatchNormResumeNamed: a checkpoint written with synchronized
// batch normalization is not resumed without it, nor one written without
// it with it; the error names the setting.
func TestSyncBatchNormResumeNamed(t *testing.T) {
	for _, tc := range []struct {
		wrote, resumes bool
		want           string
	}{
		{true, false, "sync_batchnorm is true on the checkpoint but false on this run"},
		{false, true, `sync_batchnorm is (not set) on the checkpoint but true on this run`},
	} {
		job := kerasJob(t, "batchnorm_tfkeras2.json", synthMNIST(32, 8, 6), 16)
		job.SyncBatchNorm, job.CheckpointDir = tc.wrote, t.TempDir()
		if _, errs := runGroup(t, []Job{job}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		job.SyncBatchNorm = tc.resumes
		if _, errs := runGroup(t, []Job{job}); errs[0] == nil || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("written with sync %v, resumed with %v: %v, want %q", tc.wrote, tc.resumes, errs[0], tc.want)
		}
	}
}

// killOnStats is a Group that kills its rank (kill) as it starts the
// at-th all-gather of batch-normalization statistics, stats bytes long:
// a peer lost inside a synchronized forward pass.
type killOnStats struct {
	Group
	stats, at, n int
	kill         func()
}

func (k *killOnStats) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	if len(local) == k.stats {
		if k.n++; k.n == k.at {
			k.kill()
		}
	}
	return k.Group.AllGather(ctx, local)
}

// TestSyncBatchNormPeerLost: a peer lost inside a synchronized forward
// pass fails the step of the other, at once (not after the collective's
// timeout), with an error naming the statistics it was summing; the
// moving statistics do not move.
func TestSyncBatchNormPeerLost(t *testing.T) {
	job := kerasJob(t, "batchnorm_tfkeras2.json", synthMNIST(64, 8, 7), 8)
	job.SyncBatchNorm = true
	var net *collective.MemNetwork
	start := time.Now()
	_, errs := runGroupOn(t, same(2, job), func(n *collective.MemNetwork, _ []Job) { net = n }, func(r int, g Group) Group {
		if r != 1 {
			return g
		}
		// The forward pass's count, Σ(x−K) and Σ(x−K)² of 32 channels.
		return &killOnStats{Group: g, stats: 8 * (1 + 2*32), at: 3, kill: func() { net.Kill(1) }}
	})
	took := time.Since(start)
	t.Logf("rank 0 after %v: %v", took, errs[0])
	const want = "summing the statistics of batch normalization 1 across the replicas"
	if errs[0] == nil || !strings.Contains(errs[0].Error(), want) {
		t.Errorf("rank 0: %v, want %q", errs[0], want)
	}
	if errs[1] == nil {
		t.Error("rank 1, killed: no error")
	}
	if took > 20*time.Second {
		t.Errorf("the replicas took %v to fail: they waited out a timeout", took)
	}
}

// TestSyncBatchNormElastic: under the elastic ring, synchronized batch
// normalization follows the group a generation forms: of 3 replicas, peer
// 1 dies at its 4th step, and the two others, rolled back to the last
// commit, go on summing their statistics between themselves and end with
// the same parameters and moving statistics, bit for bit.
func TestSyncBatchNormElastic(t *testing.T) {
	job := kerasJob(t, "batchnorm_tfkeras2.json", synthMNIST(144, 8, 8), 8)
	job.SyncBatchNorm, job.HashEvery = true, 0
	jobs := same(3, job)
	for i := range jobs {
		jobs[i].Faults.KillRank, jobs[i].Faults.KillAfter = 1, 4
	}
	sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3})
	if !errors.Is(errs[1], ErrInjectedKill) || errs[0] != nil || errs[2] != nil {
		t.Fatalf("%v: want peer 1's injected kill and the others done", errs)
	}
	a, b := sums[0].Run, sums[2].Run
	if a.Replicas != 2 || a.ParamsSHA256 != b.ParamsSHA256 || a.BuffersSHA256 == "" || a.BuffersSHA256 != b.BuffersSHA256 {
		t.Errorf("survivors on %d replicas: params %s and %s, buffers %s and %s", a.Replicas, a.ParamsSHA256, b.ParamsSHA256, a.BuffersSHA256, b.BuffersSHA256)
	}
}

// TestSyncBatchNormValidate: a job asking for synchronized batch
// normalization under gossip or for sparse logistic regression is
// refused before any work, saying why.
func TestSyncBatchNormValidate(t *testing.T) {
	job := kerasJob(t, "batchnorm_tfkeras2.json", synthMNIST(32, 8, 9), 8)
	job.SyncBatchNorm = true
	if err := job.Validate(); err != nil {
		t.Fatalf("the ring: %v", err)
	}
	gossip := job
	gossip.Strategy = Gossip{}
	sparseJob := sparseTestJob(sparseSet(t, 1, 40, 50, 4), nil, 50, 8, 1, "adagrad", sparse.ExchangeDense)
	if err := sparseJob.Validate(); err != nil {
		t.Fatalf("sparse-lr: %v", err)
	}
	sparseJob.SyncBatchNorm = true
	for name, j := range map[string]Job{"gossip": gossip, "sparse-lr": sparseJob} {
		if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "--sync-batchnorm") {
			t.Errorf("%s: %v, want --sync-batchnorm refused", name, err)
		}
	}
}
