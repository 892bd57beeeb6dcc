package mirrored

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// hello is what each replica sends in the start-up all-gather, in every
// mode: its settings, the size of its training shard (every replica runs
// the steps per epoch the smallest shard allows), and (chief only) where
// the run resumes. Error says why this replica cannot start, so that the
// others report it instead of waiting for it.
type hello struct {
	Settings []setting  `json:"settings"`
	Shard    int        `json:"shard"`
	Resume   *resumePos `json:"resume,omitempty"`
	Error    string     `json:"error,omitempty"`
	// Checkpoints is the newest checkpoint this replica sees in its
	// --checkpoint-dir (see Job.newestSeen): every replica must see the
	// chief's.
	Checkpoints string `json:"checkpoints,omitempty"`
}

// resumePos is the chief's checkpoint, as every replica needs to know it.
type resumePos struct {
	Path        string  `json:"path"`
	Step        int     `json:"step"`
	Epoch       int     `json:"epoch"`
	StepInEpoch int     `json:"step_in_epoch"`
	History     []Epoch `json:"history"`
	// Warnings are what every replica reports about the choice: damaged
	// newer checkpoints passed over, a checkpoint with no digest.
	Warnings []string `json:"warnings,omitempty"`
	// Elastic runs: the commit's steps per epoch (the new generation's
	// may differ) and the membership's changes so far.
	StepsPerEpoch int                `json:"steps_per_epoch,omitempty"`
	Membership    []MembershipChange `json:"membership,omitempty"`
	ScheduleNext  int                `json:"schedule_next,omitempty"` // the membership schedule's next change
}

// cluster is what the handshake established: the same on every replica.
type cluster struct {
	minShard, maxShard, total int
	resume                    *resumePos // nil: a fresh start
}

// handshake all-gathers every replica's hello and fails, on every
// replica, with each replica's start-up error or with a MismatchError
// naming every setting that differs and the ranks that hold each value.
func handshake(ctx context.Context, g Group, me hello) (cluster, error) {
	hb, err := json.Marshal(me)
	if err != nil {
		return cluster{}, err
	}
	all, err := g.AllGather(ctx, hb)
	if err != nil {
		return cluster{}, fmt.Errorf("start-up handshake (comparing the peers' settings): %w", err)
	}
	rank := g.Rank()
	hellos := make([]hello, len(all))
	who := make([]string, len(all))
	sets := make([][]setting, len(all))
	cl := cluster{minShard: math.MaxInt}
	var failed []error
	for r, b := range all {
		h := &hellos[r]
		if err := json.Unmarshal(b, h); err != nil {
			return cluster{}, fmt.Errorf("start-up handshake: rank %d sent an unreadable hello (a different meshtrain version?): %w", r, err)
		}
		who[r], sets[r] = fmt.Sprintf("rank %d", r), h.Settings
		cl.minShard, cl.maxShard, cl.total = min(cl.minShard, h.Shard), max(cl.maxShard, h.Shard), cl.total+h.Shard
		switch e := h.Error; {
		case e == "":
		case r == rank:
			failed = append(failed, errors.New(e))
		case r == 0:
			failed = append(failed, fmt.Errorf("rank 0 (the chief) could not start: %s", e))
		default:
			failed = append(failed, fmt.Errorf("rank %d could not start: %s", r, e))
		}
	}
	if len(failed) > 0 {
		return cluster{}, errors.Join(failed...)
	}
	if err := compareSettings(who, sets); err != nil {
		return cluster{}, fmt.Errorf("the peers were started with different settings: %w: start every peer with the same training flags and cluster list", err)
	}
	if err := compareCheckpointDirs(hellos); err != nil {
		return cluster{}, err
	}
	cl.resume = hellos[0].Resume
	return cl, nil
}

// failStartup reports err to the other replicas through the handshake
// they are waiting in, and returns it.
func failStartup(ctx context.Context, g Group, err error) error {
	b, _ := json.Marshal(hello{Error: err.Error()}) // a string: cannot fail
	_, _ = g.AllGather(ctx, b)
	return err
}
