package mirrored

import "github.com/meshtrain/meshtrain/mirrored/faults"

// Fault injection lives in mirrored/faults; these names keep Job.Faults
// and its hook as they were for callers.

// Faults are injected into a run for experiments and tests (Job.Faults):
// see faults.Faults.
type Faults = faults.Faults

// Point names a place in a training step where the loops call the faults
// hook.
type Point = faults.Point

// StepInfo is what the faults hook is told at each Point.
type StepInfo = faults.StepInfo

// The Points of a step (see faults.Point).
const (
	AfterGradient = faults.AfterGradient
	BeforeCombine = faults.BeforeCombine
	AfterUpdate   = faults.AfterUpdate
)

// ErrInjectedKill is returned by a replica that the fault injection killed.
var ErrInjectedKill = faults.ErrInjectedKill

// ParseSlowPeer parses --slow-peer RANK:FACTOR ("" means none).
func ParseSlowPeer(s string) (rank int, factor float64, err error) { return faults.ParseSlowPeer(s) }

// faultSettings are the faults every replica must agree on (not the
// arithmetic: a checkpoint does not record them).
func faultSettings(f *Faults) []setting {
	slow, kill := f.Describe()
	return []setting{{Name: "slow_peer", Value: slow}, {Name: "kill", Value: kill}}
}
