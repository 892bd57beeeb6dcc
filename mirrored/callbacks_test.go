package mirrored

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/callbacks"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// misleadingSet is a learnable set whose test labels are each the next
// class: the better the model learns the training set, the worse its test
// loss and accuracy, so every epoch after the first is worse than the
// first (the run a callback must act on).
func misleadingSet() *data.MNIST {
	mn := synthMNIST(480, 80, 3)
	test := *mn.Test
	test.Labels = slices.Clone(test.Labels)
	for i, l := range test.Labels {
		test.Labels[i] = uint8((int(l) + 1) % mn.NumClasses())
	}
	mn.Test = &test
	return mn
}

// callbackJob is softmax on the misleading set at a constant rate for
// epochs epochs, with cb.
func callbackJob(t *testing.T, epochs int, cb callbacks.Config) Job {
	job := testJob(t, nn.Softmax, misleadingSet(), 16, epochs)
	job.Schedule, job.WarmupEpochs = nn.ScheduleConstant, 0
	job.Callbacks = cb
	return job
}

// events collects the callback lines a run emits.
type events struct{ lines []string }

func (e *events) Observe(ev Event) error {
	if ev.Kind == EventCallback {
		e.lines = append(e.lines, ev.Info)
	}
	return nil
}

// runReplicas runs job on n in-memory replicas, checks they agree bit for
// bit, and returns rank 0's summary and callback lines.
func runReplicas(t *testing.T, n int, job Job) (*Summary, []string) {
	t.Helper()
	jobs, obs := same(n, job), make([]*events, n)
	for r := range jobs {
		obs[r] = &events{}
		jobs[r].Observers = []Observer{obs[r]}
	}
	sums, errs := runGroup(t, jobs)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if sums[r].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 || !slices.Equal(obs[r].lines, obs[0].lines) {
			t.Fatalf("rank %d ended with %s and said %q; rank 0 %s and %q", r, sums[r].Run.ParamsSHA256, obs[r].lines, sums[0].Run.ParamsSHA256, obs[0].lines)
		}
	}
	return sums[0], obs[0].lines
}

func TestEarlyStopRestoresBest(t *testing.T) {
	for _, monitor := range []string{callbacks.MonitorLoss, callbacks.MonitorAccuracy} {
		t.Run(monitor, func(t *testing.T) {
			cb := callbacks.Defaults()
			cb.Monitor, cb.EarlyStop, cb.Patience, cb.RestoreBest = monitor, true, 2, true
			sum, lines := runReplicas(t, 2, callbackJob(t, 8, cb))
			res := sum.Run
			if len(res.EpochResults) != 3 || res.Callbacks == nil || res.Callbacks.StoppedEpoch != 3 || res.Callbacks.RestoredEpoch != 1 {
				t.Fatalf("%d epochs, callbacks %+v: want a stop after epoch 3 with epoch 1 restored (test losses %v)", len(res.EpochResults), res.Callbacks, testLosses(res))
			}
			want := "epoch 3: test " + monitor + " did not improve for 2 epochs (best "
			if len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "at epoch 1): stopping; restoring epoch 1's parameters") {
				t.Errorf("lines %q: want one, %q…", lines, want)
			}
			// The restored parameters are epoch 1's: those of a run of one
			// epoch, bit for bit; the final accuracy is epoch 1's.
			one, _ := runReplicas(t, 2, callbackJob(t, 1, callbacks.Config{}))
			if res.ParamsSHA256 != one.Run.ParamsSHA256 || res.FinalAccuracy != res.EpochResults[0].TestAccuracy {
				t.Errorf("ended with %s (accuracy %v), want epoch 1's %s (%v)", res.ParamsSHA256, res.FinalAccuracy, one.Run.ParamsSHA256, res.EpochResults[0].TestAccuracy)
			}
		})
	}
}

func TestReduceLROnPlateau(t *testing.T) {
	cb := callbacks.Defaults()
	cb.ReduceLR, cb.Factor, cb.LRPatience = true, 0.5, 1
	sum, lines := runReplicas(t, 2, callbackJob(t, 4, cb))
	res := sum.Run
	// Epoch 2 does not improve on 1: the rate halves from epoch 3 on;
	// epoch 3 does not improve either: it halves again.
	var lrs []float64
	for _, ep := range res.EpochResults {
		lrs = append(lrs, ep.LR)
	}
	if base := res.LR; !slices.Equal(lrs, []float64{base, base, base * 0.5, base * 0.25}) {
		t.Errorf("rates per epoch %v, want %v, %v, then halved twice (test losses %v)", lrs, base, base, testLosses(res))
	}
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "reducing the learning rate to 0.01 (×0.5 of the schedule's)") || res.Callbacks == nil || len(res.Callbacks.Reductions) != 3 {
		t.Errorf("lines %q, report %+v: want a cut at epochs 2, 3 and 4, the first to 0.01", lines, res.Callbacks)
	}
}

func TestSaveBest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "best.safetensors")
	cb := callbacks.Defaults()
	cb.SaveBest = path
	sum, lines := runReplicas(t, 2, callbackJob(t, 3, cb))
	if len(sum.Run.EpochResults) != 3 || len(lines) != 1 || !strings.HasPrefix(lines[0], "epoch 1: test loss improved to ") {
		t.Fatalf("%d epochs, lines %q: want 3 epochs and one save, at epoch 1", len(sum.Run.EpochResults), lines)
	}
	ck, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := runReplicas(t, 2, callbackJob(t, 1, callbacks.Config{}))
	if ck.Epoch != 2 || ck.StepInEpoch != 0 || ParamsHash(ck.Params) != one.Run.ParamsSHA256 || sum.Run.Callbacks.SavedEpoch != 1 {
		t.Errorf("saved at epoch %d step %d, params %s; want the end of epoch 1, %s", ck.Epoch-1, ck.StepInEpoch, ParamsHash(ck.Params), one.Run.ParamsSHA256)
	}
}

// TestCallbacksResume: a run resumed from its checkpoint replays the
// history into its callbacks, and stops where the whole run would have.
func TestCallbacksResume(t *testing.T) {
	dir := t.TempDir()
	cb := callbacks.Defaults()
	cb.EarlyStop, cb.Patience, cb.RestoreBest = true, 2, true
	whole, _ := runReplicas(t, 1, callbackJob(t, 8, cb))
	first := callbackJob(t, 2, cb)
	first.CheckpointDir = dir
	runReplicas(t, 1, first)
	rest := callbackJob(t, 8, cb)
	rest.CheckpointDir = dir
	sum, lines := runReplicas(t, 1, rest)
	if len(sum.Run.EpochResults) != 3 || sum.Run.Callbacks.StoppedEpoch != 3 || sum.Run.Callbacks.RestoredEpoch != 0 {
		t.Fatalf("%d epochs, %+v: want the stop after epoch 3 and nothing restored", len(sum.Run.EpochResults), sum.Run.Callbacks)
	}
	if len(lines) != 2 || !strings.Contains(lines[1], "epoch 1's parameters were not kept") || whole.Run.Callbacks.StoppedEpoch != 3 {
		t.Errorf("lines %q (the whole run stopped after %d): want the stop, then that epoch 1 was not kept", lines, whole.Run.Callbacks.StoppedEpoch)
	}
}

func TestCallbacksRefusedUnderGossip(t *testing.T) {
	cb := callbacks.Defaults()
	cb.EarlyStop = true
	for _, st := range []Strategy{Gossip{}} {
		job := callbackJob(t, 2, cb)
		job.Strategy = st
		if err := job.Validate(); err == nil || !strings.Contains(err.Error(), "--early-stop-patience") {
			t.Errorf("%T: %v, want a refusal naming the flags", st, err)
		}
	}
}

func testLosses(res *Result) []float64 {
	var out []float64
	for _, ep := range res.EpochResults {
		out = append(out, ep.TestLoss)
	}
	return out
}

// TestCallbacksCompared: replicas started with different callbacks are
// stopped at start-up, naming the setting.
func TestCallbacksCompared(t *testing.T) {
	cb := callbacks.Defaults()
	cb.EarlyStop, cb.Patience = true, 2
	with, without := callbackJob(t, 2, cb), callbackJob(t, 2, callbacks.Config{})
	_, errs := runGroup(t, []Job{with, without})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "callbacks is monitor=loss early_stop=patience:2") {
			t.Errorf("rank %d: %v, want a mismatch naming the callbacks", r, err)
		}
	}
}

// TestCallbacksSparse: the callbacks act on sparse logistic regression
// too (its test log-loss, all-gathered): a test set with every label
// flipped gets worse as the model learns, so early stopping stops it and
// restores epoch 1's weights.
func TestCallbacksSparse(t *testing.T) {
	const dim = 200
	train, test := sparseSet(t, 1, 2000, dim, 5), sparseSet(t, 2, 400, dim, 5)
	var b data.Batch
	for i := range test.Len() {
		test.Append(&b, i)
	}
	rowPtr := make([]int, len(b.RowPtr))
	for i, p := range b.RowPtr {
		rowPtr[i] = int(p)
	}
	flipped := make([]float32, len(b.Labels))
	for i, l := range b.Labels {
		flipped[i] = -l
	}
	misleading, err := data.NewSparseSet(rowPtr, b.Indices, b.Values, flipped)
	if err != nil {
		t.Fatal(err)
	}
	job := sparseTestJob(train, misleading, dim, 20, 6, "adagrad", sparse.ExchangeAuto)
	job.Callbacks = callbacks.Defaults()
	job.Callbacks.EarlyStop, job.Callbacks.Patience, job.Callbacks.RestoreBest = true, 1, true
	sums, _, errs := runSparse(t, sameSparse(2, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	res := sums[0].Run
	if res.Callbacks == nil || res.Callbacks.StoppedEpoch != 2 || res.Callbacks.RestoredEpoch != 1 || sums[1].Run.ParamsSHA256 != res.ParamsSHA256 {
		t.Fatalf("callbacks %+v (test losses %v), hashes %s and %s: want both replicas stopped after epoch 2 with epoch 1's weights",
			res.Callbacks, testLosses(res), res.ParamsSHA256, sums[1].Run.ParamsSHA256)
	}
	one := sparseTestJob(train, misleading, dim, 20, 1, "adagrad", sparse.ExchangeAuto)
	oneSums, _, errs := runSparse(t, sameSparse(2, one))
	if errs[0] != nil || oneSums[0].Run.ParamsSHA256 != res.ParamsSHA256 {
		t.Errorf("ended with %s, epoch 1 of a run alone %s (%v)", res.ParamsSHA256, oneSums[0].Run.ParamsSHA256, errs[0])
	}
}

// TestCallbacksElastic: under --elastic every generation replays the
// history of the commit it starts from into its callbacks, so the
// survivors of a lost peer cut the rate and stop at the epochs the
// replay of the record does, with the same parameters.
func TestCallbacksElastic(t *testing.T) {
	cb := callbacks.Defaults()
	cb.EarlyStop, cb.Patience, cb.RestoreBest = true, 2, true
	cb.ReduceLR, cb.Factor, cb.LRPatience = true, 0.5, 1
	jobs := make([]Job, 3)
	for i := range jobs {
		jobs[i] = callbackJob(t, 8, cb)
		jobs[i].Faults.KillRank, jobs[i].Faults.KillAfter = 1, 14 // in epoch 2 (10 steps an epoch)
	}
	sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3})
	if !errors.Is(errs[1], ErrInjectedKill) || errs[0] != nil || errs[2] != nil {
		t.Fatalf("errors %v: want peer 1 killed, the others done", errs)
	}
	rec := sums[0].Run
	if sums[2].Run.ParamsSHA256 != rec.ParamsSHA256 || len(rec.Membership) != 1 || rec.Callbacks == nil || rec.Callbacks.StoppedEpoch != 3 ||
		len(rec.Callbacks.Reductions) != 2 || rec.Callbacks.RestoredEpoch != 1 {
		t.Fatalf("survivors %s and %s, membership %+v, callbacks %+v: want one change, a stop after epoch 3 with epoch 1 restored, two cuts",
			rec.ParamsSHA256, sums[2].Run.ParamsSHA256, rec.Membership, rec.Callbacks)
	}
	for i := range jobs {
		jobs[i].Faults = Faults{}
	}
	sums, errs = runElasticGroup(t, jobs, Elastic{CommitEvery: 3, Schedule: rec.Membership})
	if errs[0] != nil || sums[0].Run.ParamsSHA256 != rec.ParamsSHA256 || !slices.Equal(sums[0].Run.Callbacks.Events, rec.Callbacks.Events) {
		t.Errorf("the replay: %v, %s, events %q; the run %s, %q", errs[0], sums[0].Run.ParamsSHA256, sums[0].Run.Callbacks.Events, rec.ParamsSHA256, rec.Callbacks.Events)
	}
}
