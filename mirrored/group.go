package mirrored

import (
	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// The step's arithmetic lives in mirrored/replica; these names keep
// mirrored's API as it was for callers (a Group to Run on, a Combiner to
// set on a Job), so that code written against mirrored needs no second
// import.

// Group is what Run needs from the collective layer: see replica.Group.
type Group = replica.Group

// Traffic is implemented by Groups that count the bytes they move.
type Traffic = replica.Traffic

// LocalGroup is the Group of a single replica.
type LocalGroup = replica.LocalGroup

// NewGroup adapts a collective.Comm (see replica.NewGroup).
func NewGroup(c *collective.Comm) Group { return replica.NewGroup(c) }

// Combiner turns every replica's gradient into the one every replica
// applies (Job.Combiner): see replica.Combiner.
type Combiner = replica.Combiner

// Mean is the default Combiner: the all-reduced sum times 1/N.
type Mean = replica.Mean

// Half is the Combiner of --wire bf16 and fp16: Mean with the gradient
// travelling in 16 bits (see replica.Half); the replicas compare its
// format as the setting "wire".
type Half = replica.Half

// MeanName is Mean's Name, the default that settings leave out.
const MeanName = replica.MeanName

// DefaultGradientBucket is Config.GradientBucket's default: 1 MiB.
const DefaultGradientBucket = replica.DefaultGradientBucket

// Sparse all-gather algorithms (SparseConfig.Gather).
const (
	GatherDirect = replica.GatherDirect
	GatherRing   = replica.GatherRing
)
