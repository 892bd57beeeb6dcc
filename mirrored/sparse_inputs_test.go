package mirrored

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/sparse"
)

// writeLibSVM writes n labelled examples of features 1..8 to a file in
// dir and returns its path.
func writeLibSVM(t *testing.T, dir, name string, n int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(libsvmLines(0, n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func libsvmLines(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "%+d %d:1 %d:0.5\n", 1-2*(i%2), 1+i%5, 6+i%3)
	}
	return b.String()
}

// trainWithin runs job alone and fails the test if it does not return
// within d (an open that blocks in the kernel would never return).
func trainWithin(t *testing.T, job Job, d time.Duration) (*Summary, error) {
	t.Helper()
	type result struct {
		s   *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := Train(context.Background(), job)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(d):
		t.Fatalf("the run did not return within %v", d)
		return nil, nil
	}
}

// TestSparseInputsThatCannotBeReadTwice: a pipe (<(zcat shard.gz)) or a
// FIFO as a training or test file is refused at once naming it, instead
// of being consumed by the count up front and trained on empty, or
// blocking the open for ever (issue 24 item 1).
func TestSparseInputsThatCannotBeReadTwice(t *testing.T) {
	dir := t.TempDir()
	train := writeLibSVM(t, dir, "train.libsvm", 60)
	pipe := func() string { // what bash's <(…) gives: a pipe's /dev/fd path, with a writer
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		go func() { _, _ = w.WriteString(libsvmLines(0, 60)); w.Close() }() // under a pipe's 64 KiB: never blocks
		return fmt.Sprintf("/proc/self/fd/%d", r.Fd())
	}
	fifo := filepath.Join(dir, "fifo.libsvm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name        string
		train, test func() string
	}{
		{"training file through a pipe", pipe, nil},
		{"test file through a pipe", func() string { return train }, pipe},
		{"training file a FIFO nobody writes", func() string { return fifo }, nil},
		{"test file a FIFO nobody writes", func() string { return train }, func() string { return fifo }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := sparseTestJob(nil, nil, 10, 10, 2, "adagrad", sparse.ExchangeSparse)
			job.Sparse.Format = "libsvm" // --input-format libsvm: a pipe's name says nothing
			bad := tc.train()
			job.Sparse.TrainFiles = []string{bad}
			if tc.test != nil {
				bad = tc.test()
				job.Sparse.TestFiles = []string{bad}
			}
			s, err := trainWithin(t, job, 10*time.Second)
			if err == nil || !strings.Contains(err.Error(), bad+" is a pipe or FIFO, which can be read only once") {
				msg := ""
				if s != nil && s.Run != nil {
					msg = fmt.Sprintf(" (trained on %d examples, tested on %d)", s.Run.TrainExamples, s.Run.TestExamples)
				}
				t.Fatalf("got %v%s, want %s refused by name", err, msg, bad)
			}
		})
	}
}

// TestSparseInputChangedMidRun: a training file appended to or truncated
// during the run stops it naming the file (issue 24 item 6: a different
// model, exit 0, no word).
func TestSparseInputChangedMidRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(path string) error
	}{
		{"appended to", func(path string) error {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(libsvmLines(60, 30))
			return err
		}},
		{"truncated", func(path string) error { return os.Truncate(path, int64(len(libsvmLines(0, 30)))) }}, // at a line's end
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			train := writeLibSVM(t, dir, "train.libsvm", 60)
			job := sparseTestJob(nil, nil, 10, 10, 3, "adagrad", sparse.ExchangeSparse)
			job.Sparse.TrainFiles = []string{train}
			job.Observers = []Observer{ObserverFunc(func(e Event) error {
				if e.Kind == EventEpoch && e.Epoch != nil && e.Epoch.Epoch == 1 {
					if err := tc.change(train); err != nil {
						t.Error(err)
					}
				}
				return nil
			})}
			_, err := trainWithin(t, job, time.Minute)
			if err == nil || !strings.Contains(err.Error(), "data file "+train+" changed during the run") {
				t.Fatalf("got %v, want the run stopped naming %s", err, train)
			}
		})
	}
}
