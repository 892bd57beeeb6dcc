package mirrored

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// stopJobs are n replicas of job, each with its own Stop channel, closed
// for the ranks in stopAfter once rank 0 has ended the given epoch (0:
// before the run). The replicas cannot pass the next step's all-reduce
// before rank 0 has.
func stopJobs(job Job, n int, stopAfter map[int]int) []Job {
	jobs := same(n, job)
	chans := make([]chan struct{}, n)
	for r := range jobs {
		chans[r] = make(chan struct{})
		jobs[r].Stop = chans[r]
		if at, ok := stopAfter[r]; ok && at == 0 {
			close(chans[r])
		}
	}
	jobs[0].Observers = []Observer{ObserverFunc(func(e Event) error {
		for r, at := range stopAfter {
			if e.Kind == EventEpoch && e.Epoch.Epoch == at {
				close(chans[r])
			}
		}
		return nil
	})}
	return jobs
}

// TestStopAgreed: a replica asked to stop (rank 1 after epoch 1, step
// 12: an evicted pod) stops every replica after the same step, the next vote's
// (16), the chief writes a checkpoint there, every Result says who asked;
// resuming from it ends bit for bit where the uninterrupted run ends. When
// every replica is asked (the job deleted) they stop at the first vote.
func TestStopAgreed(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(400, 80, 6), 16, 3) // 12 steps per epoch on 2 replicas
	sums, errs := runGroup(t, same(2, job))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want := sums[0].Run.ParamsSHA256

	job.CheckpointDir = t.TempDir()
	sums, errs = runGroup(t, stopJobs(job, 2, map[int]int{1: 1}))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(job.CheckpointDir, checkpoint.FileName(16))
	for r, s := range sums {
		st := s.Run.Stopped
		if st == nil || st.Step != 16 || !slices.Equal(st.Ranks, []int{1}) || st.Checkpoint != ck || s.Run.Steps != 16 || s.Peer.Steps != 16 {
			t.Fatalf("rank %d: stopped %+v after %d steps (peer %d), want step 16 by rank 1 with %s", r, st, s.Run.Steps, s.Peer.Steps, ck)
		}
	}
	if msg := sums[0].Run.Stopped.String(); !strings.Contains(msg, "rank 1 asked to stop (SIGTERM): every peer stopped after step 16; the chief wrote "+ck) {
		t.Errorf("message %q", msg)
	}
	c, err := checkpoint.Read(ck)
	if err != nil || c.Epoch != 2 || c.StepInEpoch != 4 {
		t.Fatalf("checkpoint %s: %+v, %v; want epoch 2 step 4", ck, c, err)
	}

	sums, errs = runGroup(t, same(2, job))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r, s := range sums {
		if s.Peer.ResumedStep != 16 || s.Run.ParamsSHA256 != want || s.Run.Stopped != nil {
			t.Errorf("rank %d resumed from step %d and ended at %.12s (stopped %v), want step 16 and %.12s", r, s.Peer.ResumedStep, s.Run.ParamsSHA256, s.Run.Stopped, want)
		}
	}

	all := job
	all.CheckpointDir = ""
	sums, errs = runGroup(t, stopJobs(all, 2, map[int]int{0: 0, 1: 0}))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r, s := range sums {
		if st := s.Run.Stopped; st == nil || st.Step != StopVoteEvery || !slices.Equal(st.Ranks, []int{0, 1}) || st.Checkpoint != "" {
			t.Errorf("rank %d: stopped %+v, want at step %d by ranks 0 and 1, no checkpoint", r, st, StopVoteEvery)
		}
	}
}

// TestCheckpointDirsNotShared: replicas whose --checkpoint-dir holds
// another newest checkpoint than the chief's (empty, or stale) all fail
// at start-up saying so; copies of the same file agree; --restore
// chooses explicitly.
func TestCheckpointDirsNotShared(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(400, 80, 6), 16, 1)
	full, _ := checkpointedRun(t, job) // steps 5, 10 and 12
	size := func(step int) int64 {
		fi, err := os.Stat(filepath.Join(full.CheckpointDir, checkpoint.FileName(step)))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	tests := []struct {
		name    string
		chief   []int // the steps in each replica's own directory
		other   []int
		restore bool
		want    string // "" : runs
	}{
		{"the peer's directory is empty", []int{10}, nil, false,
			"rank 0 (the chief) sees ckpt-000000010.safetensors (%d bytes) as the newest checkpoint, rank 1 sees none: it is not one shared directory"},
		{"the peer's directory is stale", []int{10}, []int{5}, false,
			"rank 0 (the chief) sees ckpt-000000010.safetensors (%d bytes) as the newest checkpoint, rank 1 sees ckpt-000000005.safetensors"},
		{"the chief's directory is empty", nil, []int{10}, false,
			"rank 0 (the chief) sees none as the newest checkpoint, rank 1 sees ckpt-000000010.safetensors"},
		{"copies of the same checkpoint", []int{5, 10}, []int{10}, false, ""},
		{"--restore chooses", []int{10}, nil, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs := same(2, job)
			for r, steps := range [][]int{tt.chief, tt.other} {
				jobs[r].CheckpointDir = t.TempDir()
				for _, s := range steps {
					copyCheckpoint(t, full.CheckpointDir, jobs[r].CheckpointDir, s, nil)
				}
				if tt.restore {
					jobs[r].Restore = filepath.Join(full.CheckpointDir, checkpoint.FileName(10))
				}
			}
			_, errs := runGroup(t, jobs)
			for r, err := range errs {
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("rank %d: %v", r, err)
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(tt.want, "%d", strconv.FormatInt(size(10), 10)))):
					t.Errorf("rank %d: got %v, want %q", r, err, tt.want)
				}
			}
		})
	}
}

// TestGossipStopSpreads: a gossip replica asked to stop (rank 2 after the
// cluster's first epoch) tells the others through the gossip stop flag:
// every replica ends long before the budget, with the final swap among all
// three, and each Result names rank 2 (its own report "sigterm").
func TestGossipStopSpreads(t *testing.T) {
	job := testJob(t, nn.Softmax, synthMNIST(1200, 100, 7), 16, 20) // a budget of 20 epochs
	job.HashEvery, job.MeasureWait = 0, false
	jobs := gossiping(3, job, Gossip{})
	stop := make(chan struct{})
	var once sync.Once
	for r := range jobs {
		jobs[r].Stop = make(chan struct{}) // never closed: not asked
	}
	jobs[2].Stop = stop
	jobs[2].Observers = []Observer{ObserverFunc(func(e Event) error {
		if e.Kind == EventEpoch {
			once.Do(func() { close(stop) })
		}
		return nil
	})}
	sums, errs := runGossipGroup(t, jobs, nil)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r, s := range sums {
		st := s.Run.Stopped
		if st == nil || !slices.Equal(st.Ranks, []int{2}) || !st.Gossip || st.Step != s.Peer.Steps {
			t.Fatalf("rank %d: stopped %+v after %d local steps, want rank 2 named, at its own steps", r, st, s.Peer.Steps)
		}
		if want := "rank 2 asked to stop (SIGTERM): every gossip replica stopped"; !strings.Contains(st.String(), want) {
			t.Errorf("rank %d: %q, want it to contain %q", r, st, want)
		}
		if s.Gossip.StoppedBy != "sigterm" || !slices.Equal(s.Gossip.Survivors, []int{0, 1, 2}) {
			t.Errorf("rank %d: stopped by %q, survivors %v; want sigterm and all three (the final swap)", r, s.Gossip.StoppedBy, s.Gossip.Survivors)
		}
		if s.Peer.Steps > 20*25 { // the budget is 20 × 25 × 3 local steps
			t.Errorf("rank %d ran %d local steps: the stop did not spread", r, s.Peer.Steps)
		}
	}
}
