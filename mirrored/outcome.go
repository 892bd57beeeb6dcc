package mirrored

import "github.com/meshtrain/meshtrain/mirrored/outcome"

// What a run hands out lives in package mirrored/outcome, which the
// observers and the report read without importing the engine; these
// names keep it reachable from here.

// Event kinds (see outcome.Event).
const (
	EventStart      = outcome.EventStart
	EventResumed    = outcome.EventResumed
	EventStep       = outcome.EventStep
	EventEpoch      = outcome.EventEpoch
	EventCheckpoint = outcome.EventCheckpoint
	EventMembership = outcome.EventMembership
	EventCallback   = outcome.EventCallback
	EventDone       = outcome.EventDone
	EventResources  = outcome.EventResources
)

type (
	Event           = outcome.Event
	StepStats       = outcome.StepStats
	Observer        = outcome.Observer
	ObserverFunc    = outcome.ObserverFunc
	ResourceSample  = outcome.ResourceSample
	LinkRate        = outcome.LinkRate
	ResourceSampler = outcome.ResourceSampler
	Summary         = outcome.Summary
	Epoch           = outcome.Epoch
	Result          = outcome.Result
	PeerStats       = outcome.PeerStats
	GossipEval      = outcome.GossipEval
	GossipReport    = outcome.GossipReport
	EarlyStop       = outcome.EarlyStop
)
