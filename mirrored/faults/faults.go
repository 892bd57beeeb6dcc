// Package faults injects failures into a run for experiments and tests:
// a slow peer, a killed peer, and one hook that mirrored's loops call at
// named Points of every step (Faults.At). It holds no goroutines and
// touches no network: the loops call it, and the tests drive it alone.
package faults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrInjectedKill is returned by a replica that the fault injection killed.
// A worker process that gets it should exit at once, without closing its
// links, so that its peers see a crash rather than a goodbye.
var ErrInjectedKill = errors.New("killed by fault injection (--kill-rank/--kill-after)")

// Point names a place in a training step where the strategy calls the
// faults hook (Faults.At). Under the ring a step runs AfterGradient,
// BeforeCombine (the gradient all-reduce, after the barrier that measures
// waiting), then AfterUpdate; under gossip AfterGradient, AfterUpdate,
// then BeforeCombine (the average with a peer follows the local update).
type Point int

const (
	// AfterGradient: the batch is read and the local gradient computed.
	AfterGradient Point = iota
	// BeforeCombine: the replica is about to combine with the others (the
	// ring's all-reduce, gossip's average).
	BeforeCombine
	// AfterUpdate: the optimizer step is applied; the local step is done.
	AfterUpdate
)

func (p Point) String() string {
	switch p {
	case AfterGradient:
		return "after-gradient"
	case BeforeCombine:
		return "before-combine"
	case AfterUpdate:
		return "after-update"
	}
	return fmt.Sprintf("point(%d)", int(p))
}

// StepInfo is what the faults hook is told at each Point.
type StepInfo struct {
	Rank int
	// Step is the 0-based index of this replica's local step since it
	// started (after any resume): at AfterUpdate, Step+1 steps are done.
	Step int
	// Started is when the step asked for its batch.
	Started time.Time
}

// Faults are injected into a run for experiments and tests, through the
// one hook both of mirrored's strategies call at each Point of every step (Faults.At).
type Faults struct {
	// SlowRank's steps read and compute SlowFactor× as long as they
	// would: at AfterGradient it waits (SlowFactor−1)× the time the step
	// took so far, before the exchange, where real slowness would be.
	// SlowFactor ≤ 1 injects nothing.
	SlowRank   int
	SlowFactor float64
	// KillRank dies at AfterUpdate of its KillAfter-th local step (0:
	// never), before that step's gossip average or the next step's
	// all-reduce.
	KillRank  int
	KillAfter int
	// Kill, if set, is called when the kill fires, before the replica
	// returns ErrInjectedKill (a worker closes its host without a
	// goodbye, as a crash would; tests cut the rank's links).
	Kill func()
	// Delay waits for d (nil: a timer); tests may replace it.
	Delay func(ctx context.Context, d time.Duration) error
	// Hook, if set, is called at every Point after the injections above
	// (tests, and experiments the flags do not cover); an error ends the
	// run with it, as the step's error.
	Hook func(ctx context.Context, p Point, s StepInfo) error
}

// At is the faults hook: the steps of both strategies call it at each
// Point.
func (f *Faults) At(ctx context.Context, p Point, s StepInfo) error {
	switch {
	case p == AfterGradient && s.Rank == f.SlowRank && f.SlowFactor > 1:
		if err := f.delay(ctx, time.Duration(float64(time.Since(s.Started))*(f.SlowFactor-1))); err != nil {
			return err
		}
	case p == AfterUpdate && f.KillAfter > 0 && s.Rank == f.KillRank && s.Step+1 == f.KillAfter:
		if f.Kill != nil {
			f.Kill()
		}
		return fmt.Errorf("rank %d after %d local steps: %w", s.Rank, s.Step+1, ErrInjectedKill)
	}
	if f.Hook != nil {
		return f.Hook(ctx, p, s)
	}
	return nil
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

// Validate checks the faults against world replicas (world < 0: the
// ranks are checked only for being ≥ 0).
func (f *Faults) Validate(world int) error {
	if world < 0 {
		world = math.MaxInt
	}
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

// Describe names the injected faults as the replicas compare them: the
// slow peer ("none" or "RANK:FACTOR") and the kill ("none" or "rank R
// after N steps").
func (f *Faults) Describe() (slowPeer, kill string) { return f.slowString(), f.killString() }

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
