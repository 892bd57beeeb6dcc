package mirrored

import (
	"context"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
)

// loopHook is what a synchronous run adds to the plain loop at its seams:
// an elastic run's commits and membership (elastic), nothing but the
// stop vote for a plain ring run (ringHook). The loop calls every method
// at the same places whatever the run, so it reads as the plain loop.
type loopHook interface {
	// resumePoint (the chief) is the state the run starts from: the
	// checkpoint and position, or a problem for every replica to report.
	resumePoint(l *syncLoop) (*checkpoint.Checkpoint, *resumePos, string)
	// started is called once the loop resumed at pos (nil: a fresh start).
	started(l *syncLoop, pos *resumePos) error
	// stopping returns the members asked to stop before the next step
	// (none: go on); later says the step is not the epoch's first here.
	stopping(ctx context.Context, l *syncLoop, later bool) ([]int, error)
	// atStep names the step about to run for the faults hook.
	atStep(info *StepInfo)
	// stepped is called once the step's update is done, the run at global
	// step global.
	stepped(global int)
	// atCommit is called after every step (stepInEpoch > 0) and at a
	// complete epoch's end (epoch the next, stepInEpoch 0): the place
	// where a run may commit its state; an error ends the run there.
	atCommit(ctx context.Context, l *syncLoop, epoch, stepInEpoch int) error
	// finish adds the hook's part to the run's Result.
	finish(res *Result)
}

// ringHook is a plain ring run's hook: checkpoints to resume from, and
// the stop vote every StopVoteEvery steps (Job.Stop: SIGTERM).
type ringHook struct{}

var (
	_ loopHook = ringHook{}
	_ loopHook = (*elastic)(nil)
)

func (ringHook) resumePoint(l *syncLoop) (*checkpoint.Checkpoint, *resumePos, string) {
	var nstate int
	for _, a := range l.run.rep.OptState() {
		nstate += len(a)
	}
	return l.job.resumePoint(l.run.settings, l.fp, len(l.run.rep.Params()), nstate)
}

func (ringHook) started(*syncLoop, *resumePos) error { return nil }

func (ringHook) stopping(ctx context.Context, l *syncLoop, later bool) ([]int, error) {
	if l.job.Stop == nil || !later || l.global%StopVoteEvery != 0 {
		return nil, nil
	}
	return l.voteStop(ctx)
}

func (ringHook) atStep(*StepInfo) {}
func (ringHook) stepped(int)      {}

func (ringHook) atCommit(context.Context, *syncLoop, int, int) error { return nil }

func (ringHook) finish(*Result) {}
