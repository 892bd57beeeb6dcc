package mirrored

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/nn"
)

// damage functions change a checkpoint file's bytes as a disk or a copy
// might. Softmax regression's "weight" tensor is stored last (tensors are
// in name order).
var damage = []struct {
	name string
	do   func(b []byte)
}{
	{"one bit of the last parameter", func(b []byte) { b[len(b)-4] ^= 1 }},
	{"the last parameter made NaN", func(b []byte) {
		binary.LittleEndian.PutUint32(b[len(b)-4:], math.Float32bits(float32(math.NaN())))
	}},
	{"the last parameter made huge", func(b []byte) { binary.LittleEndian.PutUint32(b[len(b)-4:], math.Float32bits(3e38)) }},
}

// TestResumeFallsBackFromDamaged: a damaged newest checkpoint is reported
// as damaged and the run resumes from the newest intact one, on every
// replica alike, ending bit for bit where the uninterrupted run ends; a
// half-written temporary file is removed; a damaged --restore is an error,
// and so is a directory with no intact checkpoint.
func TestResumeFallsBackFromDamaged(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(400, 80, 6), 16, 3) // 12 steps per epoch on 2 replicas
	job.CheckpointEvery = 5
	full, res := checkpointedRun(t, job)
	want := res.ParamsSHA256
	copyCk := func(dir string, step int, hurt func([]byte)) string {
		return copyCheckpoint(t, full.CheckpointDir, dir, step, hurt)
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			auto := job
			auto.CheckpointDir = t.TempDir()
			copyCk(auto.CheckpointDir, 10, nil)
			bad := copyCk(auto.CheckpointDir, 25, d.do)
			temp := filepath.Join(auto.CheckpointDir, atomicfile.TempPrefix(checkpoint.FileName(30))+"killed")
			if err := os.WriteFile(temp, []byte("half a checkpoint"), 0o600); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			infos := map[int]string{}
			jobs := same(2, auto)
			for r := range jobs {
				jobs[r].Observers = []Observer{ObserverFunc(func(e Event) error {
					if e.Kind == EventResumed {
						mu.Lock()
						infos[r] = e.Info
						mu.Unlock()
					}
					return nil
				})}
			}
			sums, errs := runGroup(t, jobs)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for r, s := range sums {
				if s.Run.ParamsSHA256 != want || s.Peer.ResumedStep != 10 {
					t.Errorf("rank %d resumed from step %d and ended at %.12s, want step 10 and %.12s", r, s.Peer.ResumedStep, s.Run.ParamsSHA256, want)
				}
				if !strings.Contains(infos[r], bad+": damaged") || !strings.Contains(infos[r], "falling back to") {
					t.Errorf("rank %d does not say it fell back from the damaged %s: %q", r, bad, infos[r])
				}
			}
			if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the half-written %s is still there: %v", temp, err)
			}

			named := job
			named.Restore = copyCk(t.TempDir(), 25, d.do)
			bad = named.Restore
			_, errs = runGroup(t, same(2, named))
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), bad+": damaged") || !strings.Contains(err.Error(), "--restore") {
					t.Errorf("rank %d, --restore of a damaged checkpoint: %v", r, err)
				}
			}
		})
	}
	t.Run("none intact", func(t *testing.T) {
		auto := job
		auto.CheckpointDir = t.TempDir()
		copyCk(auto.CheckpointDir, 10, damage[0].do)
		_, errs := runGroup(t, same(2, auto))
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "no intact checkpoint in "+auto.CheckpointDir) {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
}

// TestEvaluateRefusesDamaged: eval verifies the checkpoint as a resume
// does, and a checkpoint holding a non-finite value fails instead of
// reporting an accuracy.
func TestEvaluateRefusesDamaged(t *testing.T) {
	mn := synthMNIST(400, 80, 6)
	job := testJob(t, nn.Softmax, mn, 16, 1)
	job.CheckpointDir = t.TempDir()
	if _, errs := runGroup(t, same(1, job)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	path, err := checkpoint.Latest(job.CheckpointDir)
	if err != nil || path == "" {
		t.Fatalf("no checkpoint: %v", err)
	}
	ctx := context.Background()
	if _, err := evaluate.Checkpoint(ctx, evaluate.Config{Checkpoint: path, MNIST: mn}); err != nil {
		t.Fatalf("the intact checkpoint: %v", err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range damage {
		b := append([]byte(nil), good...)
		d.do(b)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := evaluate.Checkpoint(ctx, evaluate.Config{Checkpoint: path, MNIST: mn})
		if !errors.Is(err, checkpoint.ErrDamaged) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %+v, %v; want an error saying %s is damaged", d.name, res, err, path)
		}
	}
}
