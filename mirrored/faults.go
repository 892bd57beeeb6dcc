package mirrored

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// ErrInjectedKill is returned by a replica that the fault injection killed.
// A worker process that gets it should exit at once, without closing its
// links, so that its peers see a crash rather than a goodbye.
var ErrInjectedKill = errors.New("killed by fault injection (--kill-rank/--kill-after)")

// Faults are injected into a run for experiments and tests.
type Faults struct {
	// SlowRank's steps take SlowFactor× as long as they would (the extra
	// time is waited inside the step: under gossip after computing the
	// gradient, under the ring before the gradient all-reduce);
	// SlowFactor ≤ 1 injects nothing.
	SlowRank   int
	SlowFactor float64
	// KillRank dies after KillAfter local steps (0: never).
	KillRank  int
	KillAfter int
	// Kill, if set, is called when the kill fires, before the replica
	// returns ErrInjectedKill (tests use it to cut the rank's links).
	Kill func()
	// Delay waits for d (nil: a timer); tests may replace it.
	Delay func(ctx context.Context, d time.Duration) error
}

// ParseSlowPeer parses --slow-peer RANK:FACTOR ("" means none).
func ParseSlowPeer(s string) (rank int, factor float64, err error) {
	if s == "" || s == "none" {
		return 0, 0, nil
	}
	r, f, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("--slow-peer %q: want RANK:FACTOR, e.g. 1:3 for rank 1 taking 3× as long per step", s)
	}
	rank, err1 := strconv.Atoi(r)
	factor, err2 := strconv.ParseFloat(f, 64)
	if err1 != nil || err2 != nil || rank < 0 || !(factor >= 1) || factor > 1000 {
		return 0, 0, fmt.Errorf("--slow-peer %q: want RANK:FACTOR with RANK ≥ 0 and FACTOR in [1, 1000]", s)
	}
	return rank, factor, nil
}

// Validate checks the faults against world replicas.
func (f *Faults) Validate(world int) error {
	if f.SlowFactor > 1 && (f.SlowRank < 0 || f.SlowRank >= world) {
		return fmt.Errorf("--slow-peer rank %d: want a rank in [0,%d)", f.SlowRank, world)
	}
	if f.SlowFactor < 0 || f.SlowFactor > 1000 {
		return fmt.Errorf("--slow-peer factor %v: want a factor in [1, 1000]", f.SlowFactor)
	}
	if f.KillAfter < 0 {
		return fmt.Errorf("--kill-after %d: want ≥ 0 steps (0: no kill)", f.KillAfter)
	}
	if f.KillAfter > 0 && (f.KillRank < 0 || f.KillRank >= world) {
		return fmt.Errorf("--kill-rank %d: want a rank in [0,%d)", f.KillRank, world)
	}
	return nil
}

// slowdown is rank's step-time factor (≤ 1: none).
func (f *Faults) slowdown(rank int) float64 {
	if rank == f.SlowRank && f.SlowFactor > 1 {
		return f.SlowFactor
	}
	return 1
}

// kills says whether rank dies now, after done steps.
func (f *Faults) kills(rank, done int) bool {
	return f.KillAfter > 0 && rank == f.KillRank && done == f.KillAfter
}

// straggle makes the slow rank's local step take slow× as long as it
// would (input, computing and exchange), the extra time spent inside the
// step, where real slowness would be. lastStep is the previous step's
// length without its injected delay; on the first step, sofar (this step
// until now) stands in for it.
func (f *Faults) straggle(ctx context.Context, rank int, lastStep, sofar time.Duration) error {
	slow := f.slowdown(rank)
	if slow <= 1 {
		return nil
	}
	if lastStep == 0 {
		lastStep = sofar
	}
	return f.delay(ctx, time.Duration(float64(lastStep)*(slow-1)))
}

// crash makes rank die after its local step done when the faults say so:
// it runs Kill (which closes the host without a goodbye, as a crash does)
// and returns ErrInjectedKill. Otherwise it returns nil.
func (f *Faults) crash(log *zap.Logger, rank, done int) error {
	if !f.kills(rank, done) {
		return nil
	}
	log.Warn("injected fault: this rank dies now", zap.Int("step", done))
	if f.Kill != nil {
		f.Kill()
	}
	return fmt.Errorf("rank %d after %d local steps: %w", rank, done, ErrInjectedKill)
}

func (f *Faults) delay(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if f.Delay != nil {
		return f.Delay(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *Faults) slowString() string {
	if f.SlowFactor <= 1 {
		return "none"
	}
	return fmt.Sprintf("%d:%g", f.SlowRank, f.SlowFactor)
}

func (f *Faults) killString() string {
	if f.KillAfter == 0 {
		return "none"
	}
	return fmt.Sprintf("rank %d after %d steps", f.KillRank, f.KillAfter)
}

// WithFaults injects f into the ring strategy through its Group: the
// gradient all-reduce (the one of nparams values) of the slow rank, or the
// barrier before it, first waits (factor−1)× the time since the previous
// collective returned (the step's input and computation), and the killed rank dies on entering the
// all-reduce that follows its KillAfter-th step.
func WithFaults(g Group, f Faults, nparams int) Group {
	if f.SlowFactor <= 1 && f.KillAfter == 0 {
		return g
	}
	return &faultGroup{Group: g, f: f, nparams: nparams, last: time.Now()}
}

type faultGroup struct {
	Group
	f       Faults
	nparams int
	last    time.Time // when the previous collective returned
	steps   int       // gradient all-reduces entered
	slowed  bool      // this step's delay was already taken (at the barrier)
}

func (g *faultGroup) mark(err error) error {
	g.last = time.Now()
	return err
}

// slowStep takes the straggler's delay for the step computed since the
// previous collective returned, once per step.
func (g *faultGroup) slowStep(ctx context.Context) error {
	if s := g.f.slowdown(g.Rank()); s > 1 && !g.slowed {
		g.slowed = true
		return g.f.delay(ctx, time.Duration(float64(time.Since(g.last))*(s-1)))
	}
	return nil
}

func (g *faultGroup) AllReduceSum(ctx context.Context, buf []float32) error {
	if len(buf) == g.nparams {
		rank := g.Rank()
		if g.f.kills(rank, g.steps) {
			if g.f.Kill != nil {
				g.f.Kill()
			}
			return fmt.Errorf("rank %d after %d steps: %w", rank, g.steps, ErrInjectedKill)
		}
		g.steps++
		if err := g.slowStep(ctx); err != nil {
			return err
		}
		g.slowed = false
	}
	return g.mark(g.Group.AllReduceSum(ctx, buf))
}

func (g *faultGroup) Broadcast(ctx context.Context, buf []float32, root int) error {
	return g.mark(g.Group.Broadcast(ctx, buf, root))
}

func (g *faultGroup) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	out, err := g.Group.AllGather(ctx, local)
	return out, g.mark(err)
}

// Barrier comes right after computing when the job measures waiting
// (Job.MeasureWait): the step's delay is taken there, before waiting.
func (g *faultGroup) Barrier(ctx context.Context) error {
	if err := g.slowStep(ctx); err != nil {
		return err
	}
	return g.mark(g.Group.Barrier(ctx))
}

func (g *faultGroup) Traffic() (int64, int64) {
	if t, ok := g.Group.(Traffic); ok {
		return t.Traffic()
	}
	return 0, 0
}
