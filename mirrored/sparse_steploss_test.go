package mirrored

import (
	"bytes"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/meshtrain/meshtrain/internal/tensorboard"
	"github.com/meshtrain/meshtrain/sparse"
)

// TestSparseStepLossIsMean: sparse-lr's per-step loss, in the progress
// lines and TensorBoard's batch_loss, is the mean per example as the
// dense models' (the gradient returns the batch's loss sum, for the
// exchange): the first step, from zero weights, is ln 2, and the steps'
// mean is the epoch's loss (every batch the same size).
func TestSparseStepLossIsMean(t *testing.T) {
	const n, batch = 200, 20
	job := sparseTestJob(sparseSet(t, 1, n, 300, 5), nil, 300, batch, 1, "adagrad", sparse.ExchangeAuto)
	var progress bytes.Buffer
	job.Progress, job.LogEvery, job.LogDir = &progress, 1, t.TempDir()
	_, _, errs := runSparse(t, []Job{job})
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
	files, _ := filepath.Glob(filepath.Join(tensorboard.WorkerDir(job.LogDir, 0), "train", "events.out.tfevents.*"))
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
