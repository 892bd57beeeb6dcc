package mirrored

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// TestOneRunPerCheckpointDir: a second run on a checkpoint directory
// another run holds is refused before it writes anything, naming the
// holder's host, pid and start time (issue 24 item 4: both ran, the
// second pruned and overwrote the first's checkpoints); the replicas of
// one run share the directory (only the chief holds it); and a lock left
// by a run that died is taken over.
func TestOneRunPerCheckpointDir(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(200, 40, 3), 16, 1)
	job.CheckpointDir = t.TempDir()
	job.CheckpointEvery = 2

	// Another run holds the directory (another process's flock conflicts
	// alike: flock locks belong to an open file, not to a process).
	other, _, err := checkpoint.LockDir(job.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	_, err = Train(t.Context(), job)
	var locked *checkpoint.LockedError
	if !errors.As(err, &locked) || !strings.Contains(err.Error(), fmt.Sprintf("is in use by another run (host %s, pid %d, started ", host, os.Getpid())) {
		t.Fatalf("a second run on a held directory: %v, want it refused naming the holder", err)
	}
	if all, _ := checkpoint.List(job.CheckpointDir); len(all) != 0 {
		t.Errorf("the refused run wrote %q", all)
	}
	// Its peers hear why the chief could not start.
	_, errs := runGroup(t, same(2, job))
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "rank 0 (the chief) could not start: checkpoint directory "+job.CheckpointDir+" is in use by another run") {
		t.Errorf("rank 1 of a refused run: %v", errs[1])
	}
	if err := other.Unlock(); err != nil {
		t.Fatal(err)
	}

	// The replicas of one run share it.
	if _, errs := runGroup(t, same(2, job)); errors.Join(errs...) != nil {
		t.Fatalf("two replicas of one run on one directory: %v", errors.Join(errs...))
	}

	// A run that died held the lock: its file remains, naming it, but
	// the kernel released the lock with the process.
	lockFile := filepath.Join(job.CheckpointDir, checkpoint.LockFileName)
	if err := os.WriteFile(lockFile, []byte("host gone, pid 999999, started 2020-01-01T00:00:00Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job.Epochs = 2 // extends the run above
	if _, errs := runGroup(t, same(2, job)); errors.Join(errs...) != nil {
		t.Fatalf("a stale lock file: %v", errors.Join(errs...))
	}
	if b, _ := os.ReadFile(lockFile); strings.Contains(string(b), "pid 999999") {
		t.Errorf("the stale holder is still named: %s", b)
	}
}
