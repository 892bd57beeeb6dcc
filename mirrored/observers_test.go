package mirrored_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/tensorboard"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/observe"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// The runs as observed by package mirrored/observe's observers, installed
// as meshtrain's commands install them: these tests are external, since
// observe imports mirrored.

// observed is job with the observers meshtrain's commands install on
// replica rank: the progress to progress (if not nil) and TensorBoard under
// logdir (if set), with the per-step figures every `every` steps.
func observed(t *testing.T, job mirrored.Job, rank int, progress io.Writer, logdir string, every int) mirrored.Job {
	t.Helper()
	obs, err := observe.Standard(observe.Options{Progress: progress, EveryRank: mirrored.IsGossip(job.Strategy), LogDir: logdir, Rank: rank, LogEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	job.Observers = obs
	return job
}

// TestLogDirEveryMode: every strategy, dense and sparse, writes one
// TensorBoard event file per replica under --logdir, with the epoch
// figures at increasing steps, and the progress lines through the same
// observer.
func TestLogDirEveryMode(t *testing.T) {
	const n, dim = 2, 300
	mn := mirrored.SynthMNIST(192, 48, 3)
	train, test := mirrored.SparseSet(t, 5, 400, dim, 5), mirrored.SparseSet(t, 6, 100, dim, 5)
	for _, mode := range []struct {
		name string
		run  func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error
	}{
		{"dense-ring", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := mirrored.NewTestJob(t, nn.Softmax, mn, 16, 2)
			job = observed(t, job, c.Rank(), progress, logdir, 2)
			_, err := mirrored.Run(ctx, job, mirrored.NewGroup(c))
			return err
		}},
		{"sparse-ring", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := mirrored.SparseTestJob(train, test, dim, 20, 2, "adagrad", sparse.ExchangeAuto)
			job = observed(t, job, c.Rank(), progress, logdir, 2)
			_, err := mirrored.Run(ctx, job, mirrored.NewGroup(c))
			return err
		}},
		{"dense-gossip", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := mirrored.NewTestJob(t, nn.Softmax, mn, 16, 2)
			job.HashEvery = 0
			job.Strategy = mirrored.Gossip{}
			job = observed(t, job, c.Rank(), progress, logdir, 1)
			_, err := mirrored.Run(ctx, job, mirrored.NewGroup(c))
			return err
		}},
		{"sparse-gossip", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := mirrored.SparseTestJob(train, test, dim, 20, 2, "adagrad", sparse.ExchangeSparse)
			job.HashEvery = 0
			job.Strategy = mirrored.Gossip{}
			job = observed(t, job, c.Rank(), progress, logdir, 1)
			_, err := mirrored.Run(ctx, job, mirrored.NewGroup(c))
			return err
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			logdir := t.TempDir()
			progress := make([]*bytes.Buffer, n)
			errs := mirrored.OnMemCluster(t, n, time.Minute, func(ctx context.Context, r int, c *collective.Comm) error {
				progress[r] = new(bytes.Buffer)
				return mode.run(ctx, c, logdir, progress[r])
			})
			seen := map[string]int{}
			for r := range n {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				checkEventFile(t, tensorboard.WorkerDir(logdir, r), seen)
			}
			// Every tag from some replica: under gossip one replica may have
			// done (nearly) all of the cluster's steps.
			for _, tag := range append(append([]string(nil), trainTags...), "epoch_accuracy") {
				if seen[tag] == 0 {
					t.Errorf("no replica wrote %s (tags %v)", tag, seen)
				}
			}
			// A dense model's training accuracy, under gossip as under the
			// ring (the replica counts its batch's correct examples).
			if strings.HasPrefix(mode.name, "dense") && seen["batch_accuracy"] == 0 {
				t.Errorf("no replica wrote batch_accuracy (tags %v)", seen)
			}
			// (Under gossip a replica's first evaluation may come at epoch 2:
			// the other one may have done most of the cluster's work.)
			if out := progress[0].String(); !regexp.MustCompile(`epoch +\d`).MatchString(out) || !strings.Contains(out, "test accuracy") {
				t.Errorf("rank 0's progress lines:\n%s", out)
			}
		})
	}
}

// trainTags are the scalars of a train run: the epoch's and the steps'.
var trainTags = []string{"epoch_loss", "epoch_learning_rate", "epoch_examples_per_sec", "batch_loss", "learning_rate",
	"examples_per_sec", "step/time_ms", "step/compute_ms", "step/comm_ms", "step/wait_ms", "step/bytes_sent"}

// checkEventFile checks a worker's TensorBoard runs: one event file in
// each of train/ and validation/, every tag at increasing steps, and the
// validation run's epoch_loss and epoch_accuracy (every replica evaluates
// at least its final parameters); it adds the tags it saw to seen.
func checkEventFile(t *testing.T, dir string, seen map[string]int) {
	t.Helper()
	for _, run := range []string{"train", "validation"} {
		files, _ := filepath.Glob(filepath.Join(dir, run, "events.out.tfevents.*"))
		if len(files) != 1 {
			t.Fatalf("%s/%s: event files %v, want one", dir, run, files)
		}
		events, err := tensorboard.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		here := map[string]int{}
		last := map[string]int64{}
		for _, ev := range events[1:] {
			for _, v := range ev.Values {
				if k, ok := last[v.Tag]; ok && ev.Step <= k {
					t.Errorf("%s: %s at step %d after step %d", files[0], v.Tag, ev.Step, k)
				}
				here[v.Tag]++
				seen[v.Tag]++
				last[v.Tag] = ev.Step
			}
		}
		if run == "validation" && (here["epoch_loss"] == 0 || here["epoch_accuracy"] == 0) {
			t.Errorf("%s: validation tags %v, want epoch_loss and epoch_accuracy", files[0], here)
		}
	}
}

// TestTensorBoardLikeKeras: the train run has the training accuracy
// Keras writes (epoch_accuracy, beside epoch_loss) and a batch_accuracy
// with every batch_loss; the epoch scalars are at the epoch's index as
// Keras writes them (0, 1, …) in both runs, so meshtrain and Keras runs
// overlay by epoch, and the per-step scalars at the global step. The
// training accuracy is also in the summary's epochs.
func TestTensorBoardLikeKeras(t *testing.T) {
	mn := mirrored.SynthMNIST(192, 48, 3)
	job := mirrored.NewTestJob(t, nn.Softmax, mn, 16, 2) // 12 steps an epoch
	logdir := t.TempDir()
	job = observed(t, job, 0, nil, logdir, 4)
	sum, err := mirrored.Train(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	for i, ep := range sum.Run.EpochResults {
		if !(ep.Accuracy > 0 && ep.Accuracy <= 1) {
			t.Errorf("epoch %d: training accuracy %v", i+1, ep.Accuracy)
		}
	}
	steps := func(run string) map[string][]int64 {
		files, _ := filepath.Glob(filepath.Join(tensorboard.WorkerDir(logdir, 0), run, "events.out.tfevents.*"))
		if len(files) != 1 {
			t.Fatalf("%s: event files %v", run, files)
		}
		events, err := tensorboard.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]int64{}
		for _, ev := range events {
			for _, v := range ev.Values {
				m[v.Tag] = append(m[v.Tag], ev.Step)
			}
		}
		return m
	}
	train, val := steps("train"), steps("validation")
	epochs, batches := []int64{0, 1}, []int64{4, 8, 12, 16, 20, 24}
	for _, tc := range []struct {
		run, tag string
		got      map[string][]int64
		want     []int64
	}{
		{"train", "epoch_loss", train, epochs},
		{"train", "epoch_accuracy", train, epochs},
		{"train", "epoch_learning_rate", train, epochs},
		{"validation", "epoch_loss", val, epochs},
		{"validation", "epoch_accuracy", val, epochs},
		{"train", "batch_loss", train, batches},
		{"train", "batch_accuracy", train, batches},
		{"train", "learning_rate", train, batches},
	} {
		if !slices.Equal(tc.got[tc.tag], tc.want) {
			t.Errorf("%s/%s at steps %v, want %v", tc.run, tc.tag, tc.got[tc.tag], tc.want)
		}
	}
}

// TestRunRecordsResources: every replica's summary holds its resource
// history, with its CPU, memory and the bytes per link, and TensorBoard
// gets the system/ scalars.
func TestRunRecordsResources(t *testing.T) {
	job := mirrored.NewTestJob(t, nn.LeNet5, mirrored.SynthMNIST(480, 60, 3), 16, 1)
	job.Resources = observe.Resources(5 * time.Millisecond)
	logdir := t.TempDir()
	jobs := mirrored.Same(2, job)
	for r := range jobs {
		jobs[r] = observed(t, jobs[r], r, nil, logdir, 0)
	}
	sums, errs := mirrored.RunGroup(t, jobs)
	for r, s := range sums {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		res := s.Peer.Resources
		if len(res) == 0 {
			t.Fatalf("rank %d: no resource samples", r)
		}
		var cpu, sent float64
		for _, x := range res {
			cpu += x.CPUUser + x.CPUSystem
			sent += x.Sent
			if x.RSSBytes <= 0 || x.Interval <= 0 {
				t.Fatalf("rank %d: sample %+v", r, x)
			}
		}
		if cpu <= 0 || sent <= 0 || len(res[len(res)-1].Links) != 1 || res[len(res)-1].Links[0].Peer != 1-r {
			t.Fatalf("rank %d: CPU %v, sent %v, links %+v", r, cpu, sent, res[len(res)-1].Links)
		}
	}
	var found bool
	filepath.WalkDir(logdir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			found = found || strings.Contains(string(b), "system/cpu_user")
		}
		return nil
	})
	if !found {
		t.Fatal("no system/cpu_user scalar in the TensorBoard files")
	}
}

// TestSparseStepLossIsMean: sparse-lr's per-step loss, in the progress
// lines and TensorBoard's batch_loss, is the mean per example as the
// dense models' (the gradient returns the batch's loss sum, for the
// exchange): the first step, from zero weights, is ln 2, and the steps'
// mean is the epoch's loss (every batch the same size).
func TestSparseStepLossIsMean(t *testing.T) {
	const n, batch = 200, 20
	job := mirrored.SparseTestJob(mirrored.SparseSet(t, 1, n, 300, 5), nil, 300, batch, 1, "adagrad", sparse.ExchangeAuto)
	var progress bytes.Buffer
	logdir := t.TempDir()
	job = observed(t, job, 0, &progress, logdir, 1)
	_, _, errs := mirrored.RunSparse(t, []mirrored.Job{job})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	var steps []float64
	for _, m := range regexp.MustCompile(`step \d+/\d+  loss ([0-9.]+)`).FindAllStringSubmatch(progress.String(), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		steps = append(steps, v)
	}
	epoch := regexp.MustCompile(`epoch +1  loss ([0-9.]+)`).FindStringSubmatch(progress.String())
	if len(steps) != n/batch || epoch == nil {
		t.Fatalf("progress: want %d step lines and the epoch's:\n%s", n/batch, progress.String())
	}
	epochLoss, _ := strconv.ParseFloat(epoch[1], 64)
	if math.Abs(steps[0]-math.Ln2) > 1e-4 || math.Abs(mean(steps)-epochLoss) > 1e-3 {
		t.Errorf("progress: step losses %v (first %v, mean %v), want the first ln 2 and the mean the epoch's %v", steps, steps[0], mean(steps), epochLoss)
	}
	files, _ := filepath.Glob(filepath.Join(tensorboard.WorkerDir(logdir, 0), "train", "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("train event files %v", files)
	}
	events, err := tensorboard.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var tb []float64
	for _, ev := range events {
		for _, v := range ev.Values {
			switch v.Tag {
			case "batch_loss":
				tb = append(tb, float64(v.Value))
			case "epoch_loss":
				epochLoss = float64(v.Value)
			}
		}
	}
	if len(tb) != n/batch || math.Abs(tb[0]-math.Ln2) > 1e-6 || math.Abs(mean(tb)-epochLoss) > 1e-5 {
		t.Errorf("TensorBoard batch_loss %v (mean %v), want the first ln 2 and the mean the epoch_loss %v", tb, mean(tb), epochLoss)
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
