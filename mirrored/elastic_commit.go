package mirrored

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// commitState is what a replica keeps across generations: its commit.
type commitState struct {
	gen                                  uint64
	step, epoch, stepInEpoch, stepsPerEp int
	params                               []float32
	opt                                  []float32
	history                              []Epoch
	membership                           []MembershipChange
	valid                                bool
	// live, if set, holds the commit in its undo log (see take), and
	// params and opt are not filled in until restore.
	live replica.Undoer
	// ck describes the checkpoint the commit would be (fingerprint,
	// settings, layout), for the checkpoint a stopping run writes.
	ck *checkpoint.Checkpoint
}

// take commits rep's state at (epoch, stepInEpoch), global step step: a
// copy, or, for a replica that keeps an undo log (sparse-lr: the old
// values of the features its steps touch), a mark in its log, so that a
// commit costs nothing and holds no second copy (a copy at Criteo's
// width was 270 MB in 60 ms, against about 1 ms a step).
func (c *commitState) take(rep replica.Replica, gen uint64, step, epoch, stepInEpoch, steps int, hist []Epoch, ms []MembershipChange) {
	c.live = nil
	if u, ok := rep.(replica.Undoer); ok && !fullCommits && u.Mark() {
		c.live, c.params, c.opt = u, nil, nil // an earlier generation's arrays go
	} else {
		c.params = append(c.params[:0], rep.Params()...)
		c.opt = c.opt[:0]
		for _, a := range rep.OptState() {
			c.opt = append(c.opt, a...)
		}
	}
	c.gen, c.step, c.epoch, c.stepInEpoch, c.stepsPerEp = gen, step, epoch, stepInEpoch, steps
	c.history = append(c.history[:0], hist...)
	c.membership = append(c.membership[:0], ms...)
	c.valid = true
}

// restore makes the commit's state readable (params, opt) after its
// generation ended: a replica with an undo log takes its own arrays back
// to the mark, and they become the commit's. Called once a generation
// failed or changed, before anything reads the commit.
func (c *commitState) restore() {
	u := c.live
	if u == nil {
		return
	}
	c.live = nil
	u.Undo()
	c.params = u.Params()
	c.opt = c.opt[:0]
	for _, a := range u.OptState() {
		c.opt = append(c.opt, a...)
	}
}

// fullCommits makes every commit a copy (tests compare the two).
var fullCommits = false

// The elastic run's part of the sync loop (loopHook): the generation
// starts from the chief's commit, commits at every CommitEvery steps and
// epoch's end, and there asks its machine whether the membership changes.

// resumePoint is the chief's last commit, if it has one, else the
// checkpoint a plain run resumes from.
func (e *elastic) resumePoint(l *syncLoop) (*checkpoint.Checkpoint, *resumePos, string) {
	c := &e.commit
	if !c.valid {
		return ringHook{}.resumePoint(l)
	}
	e.mu.Lock()
	if !e.failedAt.IsZero() {
		e.mach.Paused(time.Since(e.failedAt).Seconds())
	}
	record, next := slices.Clone(e.mach.Record()), e.mach.NextChange()
	e.mu.Unlock()
	return &checkpoint.Checkpoint{Params: c.params, OptState: c.opt}, &resumePos{
		Path: fmt.Sprintf("the in-memory commit of step %d", c.step), Step: c.step, Epoch: c.epoch, StepInEpoch: c.stepInEpoch,
		StepsPerEpoch: c.stepsPerEp, History: slices.Clone(c.history), Membership: record, ScheduleNext: next,
	}, ""
}

// started is called once generation's loop l has resumed: every replica
// takes the chief's record of the membership, and the state it starts
// from is the first commit.
func (e *elastic) started(l *syncLoop, pos *resumePos) error {
	e.stopAll = nil
	var record []MembershipChange
	next := 0
	if pos != nil {
		record, next = pos.Membership, pos.ScheduleNext
	}
	e.mu.Lock()
	d, announce := e.mach.Started(pos != nil, record, next, l.global)
	record, gen, next := e.mach.Record(), e.mach.Gen(), e.mach.NextChange()
	e.mu.Unlock()
	if err := membership.Reachable(e.cfg.Schedule, next, l.total); err != nil {
		return err
	}
	e.commit.take(l.run.rep, gen, l.global, l.startEpoch, l.skip, l.steps, l.res.EpochResults, record)
	e.commit.ck = l.checkpointTemplate()
	if d != nil {
		return e.decided(l, d, record) // the change recorded at this commit (a loss before the next)
	}
	if c := announce; c != nil {
		sh := membership.NewShift(*c, l.global, l.steps, l.job.BatchSize, l.rate(l.global), e.cfg.LR)
		info := membership.Line(*c, record[:max(0, len(record)-1)], sh, nil)
		return l.obs.emit(Event{Kind: EventMembership, Step: l.global, Steps: l.total, Info: info, Change: c, Shift: &sh})
	}
	return nil
}

// stopping: every member was asked to stop (see membership.StopAll).
func (e *elastic) stopping(context.Context, *syncLoop, bool) ([]int, error) {
	return e.stopAll, nil
}

// atStep names the step by its cluster index and this process's steps
// over every generation (the faults count them).
func (e *elastic) atStep(info *StepInfo) {
	info.Rank, info.Step = e.self, e.localSteps
	e.localSteps++
}

func (e *elastic) stepped(global int) { e.lastStep, e.ran = global, e.ran+1 }

// atCommit, every CommitEvery steps within an epoch and at its end,
// commits l's state at (epoch, stepInEpoch) and learns, with one small
// all-reduce, whether a worker waits to be admitted or a member was asked
// to stop; the machine then decides whether the generation ends here.
func (e *elastic) atCommit(ctx context.Context, l *syncLoop, epoch, stepInEpoch int) error {
	if stepInEpoch > 0 && (l.global%e.cfg.CommitEvery != 0 || stepInEpoch >= l.steps) {
		return nil
	}
	rep := l.run.rep
	rep.Settle()
	e.mu.Lock()
	record, gen, joins := e.mach.Record(), e.mach.Gen(), e.mach.Joins()
	e.mu.Unlock()
	e.commit.take(rep, gen, l.global, epoch, stepInEpoch, l.steps, l.res.EpochResults, record)
	e.commit.ck = l.checkpointTemplate()
	// A flag per cluster peer that asks to join, then one per member
	// asked to stop (SIGTERM: a pod evicted, a machine preempted).
	v := make([]float32, 2*e.n)
	for _, p := range joins {
		v[p] = 1
	}
	if stopAsked(e.job.Stop) {
		v[e.n+e.self] = 1
	}
	if err := l.g.AllReduceSum(ctx, v); err != nil {
		return fmt.Errorf("step %d: the commit's membership check: %w", l.global, err)
	}
	var joining, stopping []int
	for p := range e.n {
		if v[p] > 0 {
			joining = append(joining, p)
		}
		if v[e.n+p] > 0 {
			stopping = append(stopping, p)
		}
	}
	e.mu.Lock()
	d := e.mach.AtCommit(l.global, joining, stopping)
	e.mu.Unlock()
	if d == nil {
		return nil
	}
	return e.decided(l, d, record)
}

// decided carries out the machine's decision at a commit: the generation
// ends (a membershipChangeError), or the run stops before the next step.
func (e *elastic) decided(l *syncLoop, d *membership.Decision, record []MembershipChange) error {
	switch {
	case d.Kind == membership.StopAll:
		e.stopAll = d.Leaving
		return nil
	case d.Kind == membership.Leave && d.Rejoin:
		return &membershipChangeError{why: d.Why, rejoin: true}
	case d.Kind == membership.Leave:
		l.res.Membership = record
		l.peer.Left = d.Reason
		return &membershipChangeError{why: d.Why, left: &Summary{Run: l.res, Peer: l.peer}}
	}
	return &membershipChangeError{why: d.Why}
}

func (e *elastic) finish(res *Result) { res.Membership = e.record() }

// stopAsked says whether stop is closed.
func stopAsked(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
