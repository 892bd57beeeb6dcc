package nn

import (
	"fmt"
	"math"
)

// Learning-rate schedule kinds accepted by NewSchedule.
const (
	ScheduleConstant = "constant"
	ScheduleStep     = "step"   // × Gamma every DecayEvery steps
	ScheduleCosine   = "cosine" // cosine from the base rate to MinLR over TotalSteps
)

// ScheduleNames lists the kinds NewSchedule accepts.
var ScheduleNames = []string{ScheduleConstant, ScheduleStep, ScheduleCosine}

// ScheduleConfig describes a learning-rate schedule in optimizer steps.
type ScheduleConfig struct {
	Kind       string
	Base       float64 // the rate after warm-up, > 0
	Gamma      float64 // step: factor per decay, in (0, 1]
	DecayEvery int     // step: steps between decays, > 0
	TotalSteps int     // cosine: steps to reach MinLR (counted from step 0), > WarmupSteps
	MinLR      float64 // cosine: final rate, in [0, Base]
	// WarmupSteps ramps the rate linearly from Base/WarmupSteps at step 0 to
	// Base at step WarmupSteps−1; after it the schedule applies unchanged
	// (step decay counts from step 0; cosine runs from WarmupSteps to TotalSteps).
	WarmupSteps int
}

// Schedule gives the learning rate for an optimizer step; it is a pure
// function of the step, so every replica computes the same rate.
type Schedule struct{ c ScheduleConfig }

// NewSchedule validates c.
func NewSchedule(c ScheduleConfig) (Schedule, error) {
	if !(c.Base > 0) || math.IsInf(c.Base, 0) {
		return Schedule{}, fmt.Errorf("nn: learning rate %v: want a finite value > 0", c.Base)
	}
	if c.WarmupSteps < 0 {
		return Schedule{}, fmt.Errorf("nn: %d warm-up steps: want ≥ 0", c.WarmupSteps)
	}
	switch c.Kind {
	case ScheduleConstant:
	case ScheduleStep:
		if !(c.Gamma > 0 && c.Gamma <= 1) {
			return Schedule{}, fmt.Errorf("nn: step decay factor %v: want a value in (0, 1]", c.Gamma)
		}
		if c.DecayEvery <= 0 {
			return Schedule{}, fmt.Errorf("nn: step decay every %d steps: want > 0", c.DecayEvery)
		}
	case ScheduleCosine:
		if c.TotalSteps <= c.WarmupSteps {
			return Schedule{}, fmt.Errorf("nn: cosine over %d steps with %d warm-up steps: want more steps than warm-up", c.TotalSteps, c.WarmupSteps)
		}
		if !(c.MinLR >= 0 && c.MinLR <= c.Base) {
			return Schedule{}, fmt.Errorf("nn: cosine final rate %v: want a value in [0, %v]", c.MinLR, c.Base)
		}
	default:
		return Schedule{}, fmt.Errorf("nn: unknown learning-rate schedule %q: want one of %v", c.Kind, ScheduleNames)
	}
	return Schedule{c}, nil
}

// Scaled is s with every rate times f (an elastic run's follows its peers).
func (s Schedule) Scaled(f float64) Schedule { s.c.Base *= f; s.c.MinLR *= f; return s }

// At returns the learning rate for step (0-based).
func (s Schedule) At(step int) float64 {
	c := s.c
	if step < c.WarmupSteps {
		return c.Base * float64(step+1) / float64(c.WarmupSteps)
	}
	switch c.Kind {
	case ScheduleStep:
		return c.Base * math.Pow(c.Gamma, float64(step/c.DecayEvery))
	case ScheduleCosine:
		frac := min(1, float64(step-c.WarmupSteps)/float64(c.TotalSteps-c.WarmupSteps))
		return c.MinLR + (c.Base-c.MinLR)*(1+math.Cos(math.Pi*frac))/2
	}
	return c.Base
}
