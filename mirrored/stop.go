package mirrored

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
)

// StopVoteEvery is how often (in global steps) the replicas of a run with
// Job.Stop vote on stopping: a tiny all-reduce of one flag per rank. A
// replica asked to stop is heard at the next vote, so the run stops at
// most StopVoteEvery steps (plus a checkpoint) after the request; between
// votes a step costs nothing more.
const StopVoteEvery = 8

// voteStop (a run with Job.Stop, every StopVoteEvery steps) all-reduces
// which replicas were asked to stop; a non-empty result stops them all
// at this step.
func (l *syncLoop) voteStop(ctx context.Context) ([]int, error) {
	flags := make([]float32, l.world)
	select {
	case <-l.job.Stop:
		flags[l.rank] = 1
	default:
	}
	if err := l.g.AllReduceSum(ctx, flags); err != nil {
		return nil, fmt.Errorf("step %d: voting on stopping: %w", l.global, err)
	}
	var ranks []int
	for r, f := range flags {
		if f > 0 {
			ranks = append(ranks, r)
		}
	}
	return ranks, nil
}

// stopNow ends the run early at pipeline position (epoch, stepInEpoch):
// every replica settles, the chief writes the checkpoint.
func (l *syncLoop) stopNow(ranks []int, epoch, stepInEpoch int) error {
	l.run.rep.Settle()
	l.res.Stopped = &EarlyStop{Step: l.global, Ranks: ranks}
	if l.job.CheckpointDir == "" {
		return nil
	}
	if err := l.checkpoint(epoch, stepInEpoch); err != nil {
		return err
	}
	l.res.Stopped.Checkpoint = filepath.Join(l.job.CheckpointDir, checkpoint.FileName(l.global))
	return nil
}

// newestSeen is what this replica finds newest in Job.CheckpointDir, for
// the handshake to compare ("" when there is no directory to compare, or
// the chief resumes from --restore): see checkpoint.NewestSeen.
func (j *Job) newestSeen() string {
	if j.CheckpointDir == "" || j.Restore != "" {
		return ""
	}
	return checkpoint.NewestSeen(j.CheckpointDir)
}

// compareCheckpointDirs fails when the replicas see different newest
// checkpoints in their --checkpoint-dir (checkpoint.CompareSeen).
func compareCheckpointDirs(hellos []hello) error {
	seen := make([]string, len(hellos))
	for r, h := range hellos {
		seen[r] = h.Checkpoints
	}
	return checkpoint.CompareSeen(seen)
}
