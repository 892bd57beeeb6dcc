package report

import (
	"time"

	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/mirrored"
)

// RunInfo is what a cluster was asked to run, as the summary records it.
type RunInfo struct {
	Strategy      string `json:"strategy"`
	Security      string `json:"security"`
	AllReduceAlgo string `json:"allreduce_algo"`
	LinkFaults    string `json:"link_faults"`
	// Wire is the dense gradient's format between peers when it is not
	// fp32 (bf16, fp16: replica.WireOf), which halves its bytes.
	Wire string `json:"wire,omitempty"`
}

// Peer is one worker's outcome.
type Peer struct {
	Rank int `json:"rank"`
	// Addr is the worker's address; PID its process.
	Addr string `json:"addr"`
	PID  int    `json:"pid"`
	// Summary is the worker's report (nil if it failed).
	Summary *mirrored.Summary `json:"-"`
	// Err is how the worker failed ("" if it did not).
	Err string `json:"error,omitempty"`
}

// Report is a finished launch.
type Report struct {
	Peers []Peer
	// Identical says whether every peer ended with the same parameters.
	Identical bool
	// Gossip is Config.Gossip: replicas that differ are expected, and
	// Lost lists the ranks that failed while the others finished.
	Gossip      bool
	Lost        []int
	WallSeconds float64
	// Started is when the run started; Info what it was asked to run.
	Started time.Time
	Info    RunInfo
	// Cost, if set, is a calibration of the cost model: the verdict puts
	// its predicted step beside the measured one.
	Cost *cost.Params
}

// Identical says whether every peer with a summary ended with the same
// parameters.
func Identical(peers []Peer) bool {
	first := ""
	for _, p := range peers {
		switch {
		case p.Summary == nil || p.Summary.Peer.Left != "": // an elastic peer that left has no final parameters
		case first == "":
			first = p.Summary.Run.ParamsSHA256
		case p.Summary.Run.ParamsSHA256 != first:
			return false
		}
	}
	return true
}
