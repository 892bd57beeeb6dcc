package mirrored

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/sparse"
)

// TestSparseMemoryCheck: a --features whose arrays cannot fit in the
// memory the process may use is refused, with the figures, before
// anything is allocated.
func TestSparseMemoryCheck(t *testing.T) {
	old := debug.SetMemoryLimit(1 << 30)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	for _, tc := range []struct {
		name     string
		features int
		opt      string
		exch     sparse.Exchange
		ckdir    bool
		want     string // "" accepted
	}{
		{"small", 1000, "adagrad", sparse.ExchangeAuto, true, ""},
		{"criteo fits 1 GiB", 33_762_578, "sgd", sparse.ExchangeSparse, false, ""},
		{"max int32", math.MaxInt32, "adagrad", sparse.ExchangeAuto, false,
			"--features 2147483647 needs about 24.0 GiB for the model alone (weights 8.0 GiB, adagrad state 8.0 GiB, dense exchange buffer 8.0 GiB), more than the 1.0 GiB this process may use (the Go memory limit (GOMEMLIMIT))"},
		{"criteo ftrl with checkpoints", 33_762_578, "ftrl", sparse.ExchangeSparse, true, "checkpoint encoding 1.0 GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := sparseTestJob(sparseSet(t, 1, 10, 5, 2), nil, tc.features, 5, 1, tc.opt, tc.exch)
			if tc.ckdir {
				job.CheckpointDir = t.TempDir()
			}
			err := job.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSparseBadTestFileUpFront: a corrupt --test-files file stops the run
// before it starts (no step taken), naming the file and line, on every
// replica.
func TestSparseBadTestFileUpFront(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, bad int) string {
		var b strings.Builder
		for i := range 60 {
			if i == bad {
				b.WriteString("+1 3:1 3:2\n")
				continue
			}
			fmt.Fprintf(&b, "%+d %d:1 %d:0.5\n", 1-2*(i%2), 1+i%5, 6+i%3)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	train, test := write("train.libsvm", -1), write("test.libsvm", 4)
	job := sparseTestJob(nil, nil, 10, 10, 2, "adagrad", sparse.ExchangeSparse)
	job.Sparse.TrainFiles, job.Sparse.TestFiles = []string{train}, []string{test}
	started := make([]bool, 2)
	jobs := sameSparse(2, job)
	for r := range jobs {
		jobs[r].Observers = []Observer{ObserverFunc(func(e Event) error {
			if e.Kind == EventStart {
				started[r] = true
			}
			return nil
		})}
	}
	_, _, errs := runSparse(t, jobs)
	for r, err := range errs {
		if err == nil || started[r] {
			t.Errorf("rank %d: %v (started: %v); want an error before the run starts", r, err, started[r])
		}
	}
	// One file for two replicas is split by example: each parses every line.
	if err := errs[0]; err == nil || !strings.Contains(err.Error(), test+": line 5: feature index 3 appears twice") {
		t.Errorf("rank 0: %v, want the test file's line 5 named", err)
	}
}
