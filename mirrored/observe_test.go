package mirrored

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/tensorboard"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// TestLogDirEveryMode: every strategy, dense and sparse, writes one
// TensorBoard event file per replica under --logdir, with the epoch
// figures at increasing steps, and the progress lines through the same
// observer.
func TestLogDirEveryMode(t *testing.T) {
	const n, dim = 2, 300
	mn := synthMNIST(192, 48, 3)
	train, test := sparseSet(t, 5, 400, dim, 5), sparseSet(t, 6, 100, dim, 5)
	for _, mode := range []struct {
		name string
		run  func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error
	}{
		{"dense-ring", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := testJob(t, nn.Softmax, mn, 16, 2)
			job.LogDir, job.Progress, job.LogEvery = logdir, progress, 2
			_, err := Run(ctx, job, NewGroup(c))
			return err
		}},
		{"sparse-ring", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := sparseTestJob(train, test, dim, 20, 2, "adagrad", sparse.ExchangeAuto)
			job.LogDir, job.Progress, job.LogEvery = logdir, progress, 2
			_, err := Run(ctx, job, NewGroup(c))
			return err
		}},
		{"dense-gossip", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := testJob(t, nn.Softmax, mn, 16, 2)
			job.LogDir, job.Progress, job.HashEvery, job.LogEvery = logdir, progress, 0, 1
			job.Strategy = Strategy{Name: StrategyGossip}
			_, err := Run(ctx, job, NewGroup(c))
			return err
		}},
		{"sparse-gossip", func(ctx context.Context, c *collective.Comm, logdir string, progress *bytes.Buffer) error {
			job := sparseTestJob(train, test, dim, 20, 2, "adagrad", sparse.ExchangeSparse)
			job.LogDir, job.Progress, job.HashEvery, job.LogEvery = logdir, progress, 0, 1
			job.Strategy = Strategy{Name: StrategyGossip}
			_, err := Run(ctx, job, NewGroup(c))
			return err
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			logdir := t.TempDir()
			progress := make([]*bytes.Buffer, n)
			_, errs := onMemCluster(t, n, time.Minute, nil, func(ctx context.Context, r int, c *collective.Comm) (struct{}, error) {
				progress[r] = new(bytes.Buffer)
				return struct{}{}, mode.run(ctx, c, logdir, progress[r])
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

// closeCounter is an observer that counts its closes.
type closeCounter struct{ closes int }

func (c *closeCounter) Observe(Event) error { return nil }
func (c *closeCounter) Close() error        { c.closes++; return nil }

// TestObserversCloseOnce: the done event closes the observers (the
// TensorBoard file), and the close deferred for failures does not close
// them a second time; an observer's error reaches the run.
func TestObserversCloseOnce(t *testing.T) {
	cc := &closeCounter{}
	boom := errors.New("disk full")
	o := &observers{obs: []Observer{cc, ObserverFunc(func(e Event) error {
		if e.Kind == EventEpoch {
			return boom
		}
		return nil
	})}}
	if err := o.emit(Event{Kind: EventEpoch}); !errors.Is(err, boom) {
		t.Fatalf("epoch: %v, want the observer's error", err)
	}
	if err := o.emit(Event{Kind: EventDone}); err != nil {
		t.Fatal(err)
	}
	if err := o.close(); err != nil || cc.closes != 1 {
		t.Fatalf("closed %d times (%v), want once", cc.closes, err)
	}
}

// TestStepSampler: an OnEvent hook gets the steps summed up every `every`
// steps and at the last one (with the mean loss of those steps), and a
// StepProgress fed those sums writes the lines a replica's own would.
func TestStepSampler(t *testing.T) {
	var got []Event
	s := &stepSampler{onEvent: func(e Event) { got = append(got, e) }, every: 10, last: time.Now().Add(time.Hour)}
	var direct, relayed bytes.Buffer
	own := NewStepProgress(&direct, false, 10, 1, "")
	for step := 1; step <= 25; step++ {
		e := Event{Kind: EventStep, Step: step, Steps: 25, Train: &StepStats{Loss: float64(step), Examples: 4}}
		own.Step(e)
		if err := s.Observe(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Observe(Event{Kind: EventEpoch}); err != nil {
		t.Fatal(err)
	}
	want := []struct{ step, steps, examples int }{{10, 10, 40}, {20, 10, 40}, {25, 5, 20}}
	if len(got) != len(want)+1 || got[len(got)-1].Kind != EventEpoch {
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

// TestTensorBoardLikeKeras: the train run has the training accuracy
// Keras writes (epoch_accuracy, beside epoch_loss) and a batch_accuracy
// with every batch_loss; the epoch scalars are at the epoch's index as
// Keras writes them (0, 1, …) in both runs, so meshtrain and Keras runs
// overlay by epoch, and the per-step scalars at the global step. The
// training accuracy is also in the summary's epochs.
func TestTensorBoardLikeKeras(t *testing.T) {
	mn := synthMNIST(192, 48, 3)
	job := testJob(t, nn.Softmax, mn, 16, 2) // 12 steps an epoch
	job.LogDir, job.LogEvery = t.TempDir(), 4
	sum, err := Train(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	for i, ep := range sum.Run.EpochResults {
		if !(ep.Accuracy > 0 && ep.Accuracy <= 1) {
			t.Errorf("epoch %d: training accuracy %v", i+1, ep.Accuracy)
		}
	}
	steps := func(run string) map[string][]int64 {
		files, _ := filepath.Glob(filepath.Join(tensorboard.WorkerDir(job.LogDir, 0), run, "events.out.tfevents.*"))
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
